// authenticatorData (WebAuthn §6.1): rpIdHash | flags | signCount |
// attestedCredentialData? | extensions?

public import CBOR

/// The flags byte of authenticatorData (WebAuthn §6.1).
public struct AuthenticatorDataFlags: OptionSet, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// UP: the user was present.
    public static let userPresent = AuthenticatorDataFlags(rawValue: 0x01)
    /// UV: the user was verified.
    public static let userVerified = AuthenticatorDataFlags(rawValue: 0x04)
    /// AT: attested credential data follows.
    public static let attestedCredentialData = AuthenticatorDataFlags(rawValue: 0x40)
    /// ED: extension data follows.
    public static let extensionData = AuthenticatorDataFlags(rawValue: 0x80)
}

/// Builds authenticatorData.
public struct AuthenticatorData: Sendable {
    /// SHA-256 of the RP ID.
    public var rpIdHash: [UInt8]
    /// UP, UV, AT, ED.
    public var flags: AuthenticatorDataFlags
    /// The signature counter.
    public var signCount: UInt32
    /// AAGUID, credential ID and COSE public key, for makeCredential.
    public var attestedCredential: (aaguid: [UInt8], credentialId: [UInt8], publicKey: CBORValue)?
    /// The authenticator extension outputs, if any.
    public var extensions: CBORValue?

    /// The bytes; AT and ED are set from the presence of their parts.
    public var bytes: [UInt8] {
        var flags = self.flags
        if attestedCredential != nil { flags.insert(.attestedCredentialData) }
        if extensions != nil { flags.insert(.extensionData) }
        var out = rpIdHash
        out.append(flags.rawValue)
        appendBigEndian(signCount, into: &out)
        if let attested = attestedCredential {
            out.append(contentsOf: attested.aaguid)
            out.append(UInt8(truncatingIfNeeded: attested.credentialId.count >> 8))
            out.append(UInt8(truncatingIfNeeded: attested.credentialId.count))
            out.append(contentsOf: attested.credentialId)
            attested.publicKey.encode(into: &out)
        }
        extensions?.encode(into: &out)
        return out
    }
}

func appendBigEndian(_ value: UInt32, into out: inout [UInt8]) {
    out.append(UInt8(truncatingIfNeeded: value >> 24))
    out.append(UInt8(truncatingIfNeeded: value >> 16))
    out.append(UInt8(truncatingIfNeeded: value >> 8))
    out.append(UInt8(truncatingIfNeeded: value))
}
