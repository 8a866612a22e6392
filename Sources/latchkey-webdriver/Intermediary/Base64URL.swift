// base64url (RFC 4648 §5), as WebAuthn §11 encodes credential IDs, keys and
// user handles. Clients differ on padding (Selenium's Python bindings pad
// with `=`, the control API never does), so decoding takes either and the
// intermediary hands latchkeyd the unpadded form.

import Foundation

enum Base64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The bytes, or nil when `text` is not base64url (padded or not).
    static func decode(_ text: String) -> [UInt8]? {
        var body = Substring(text)
        while body.hasSuffix("=") { body = body.dropLast() }
        guard body.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }),
            body.count % 4 != 1
        else { return nil }
        var base64 = body.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64).map { [UInt8]($0) }
    }

    /// The unpadded form of base64url `text`; nil when it is not base64url.
    static func canonical(_ text: String) -> String? {
        decode(text).map(encode)
    }
}
