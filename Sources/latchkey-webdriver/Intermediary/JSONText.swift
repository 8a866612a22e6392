// JSON text in and out of LatchkeyJSON's JSONValue, the tree WebAuthn §11's
// parameters are checked on (an absent property, null, a boolean and a number
// stay apart).

import Foundation
import LatchkeyJSON

extension JSONValue {
    /// The value parsed from JSON text; nil for text that is not JSON.
    static func parse(_ bytes: some Collection<UInt8>) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    }

    /// The JSON text, keys sorted.
    var text: Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)) ?? Data("null".utf8)
    }
}
