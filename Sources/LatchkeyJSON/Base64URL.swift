// base64url (RFC 4648 §5), as WebAuthn JSON, CXF and the control API write byte
// strings: written without padding, read with or without it. The one place latchkey
// turns bytes into base64url and back (the daemon's documents, latchkeyctl,
// latchkey-webdriver), over swift-extras-base64's codec; no Foundation.

internal import ExtrasBase64

/// base64url without padding, and the ways latchkey reads it.
public enum Base64URL {
    /// `bytes` as base64url without padding.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        Base64.encodeToString(bytes: bytes, options: [.base64UrlAlphabet, .omitPaddingCharacter])
    }

    /// The bytes of base64url `text`, with or without its padding (clients differ:
    /// Selenium's Python bindings pad with `=`, the control API never does); nil when
    /// it is not base64url. `padding` false refuses padding (CXF, the export
    /// envelope); `standardAlphabet` also takes standard base64's `+` and `/` (the
    /// control API's requests).
    public static func decode(_ text: String, padding: Bool = true, standardAlphabet: Bool = false) -> [UInt8]? {
        var bytes = Array(text.utf8)
        while padding, bytes.last == UInt8(ascii: "=") { bytes.removeLast() }
        // One character over a whole group is never an encoding; padding only ends one.
        guard bytes.count % 4 != 1, !bytes.contains(UInt8(ascii: "=")) else { return nil }
        if standardAlphabet {
            for index in bytes.indices {
                switch bytes[index] {
                case UInt8(ascii: "+"): bytes[index] = UInt8(ascii: "-")
                case UInt8(ascii: "/"): bytes[index] = UInt8(ascii: "_")
                default: break
                }
            }
        }
        return try? Base64.decode(bytes: bytes, options: [.base64UrlAlphabet, .omitPaddingCharacter])
    }

    /// The unpadded form of base64url `text`; nil when it is not base64url.
    public static func canonical(_ text: String) -> String? {
        decode(text).map { encode($0) }
    }

    /// `text` as unpadded base64url, whether it came that way or as standard base64:
    /// `+` and `/` become `-` and `_`, padding is dropped, nothing is checked (the daemon
    /// says what is wrong with an ID it cannot read).
    public static func unpadded(_ text: String) -> String {
        var result = ""
        for character in text where character != "=" {
            switch character {
            case "+": result.append("-")
            case "/": result.append("_")
            default: result.append(character)
            }
        }
        return result
    }
}
