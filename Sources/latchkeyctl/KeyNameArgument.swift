// Key names on the command line: every argument and option that names a key
// is a KeyName (LatchkeyContract, the daemon's own type), so an invalid name
// stops latchkeyctl before it connects, with the rule, instead of becoming a
// request path.

import ArgumentParser
import LatchkeyContract

extension KeyName {
    /// ArgumentParser's `transform:` for a key name.
    static func argument(_ text: String) throws -> KeyName {
        do {
            return try KeyName(text)
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// The name in double quotes, for messages.
    var quoted: String { rawValue.quoted }
}
