// authenticatorGetInfo (0x04), CTAP 2.1 §6.4: the response map. What goes in
// it is Authenticator+GetInfo.swift's business.

public import CBOR

/// The authenticatorGetInfo response (CTAP 2.1 §6.4). Only what latchkey does
/// is advertised.
///
/// | key  | name                             |
/// |------|----------------------------------|
/// | 0x01 | versions                         |
/// | 0x02 | extensions                       |
/// | 0x03 | aaguid                           |
/// | 0x04 | options                          |
/// | 0x05 | maxMsgSize                       |
/// | 0x06 | pinUvAuthProtocols               |
/// | 0x07 | maxCredentialCountInList         |
/// | 0x08 | maxCredentialIdLength            |
/// | 0x09 | transports                       |
/// | 0x0A | algorithms                       |
/// | 0x0B | maxSerializedLargeBlobArray      |
/// | 0x0C | forcePINChange                   |
/// | 0x0D | minPINLength                     |
/// | 0x0E | firmwareVersion                  |
/// | 0x0F | maxCredBlobLength                |
/// | 0x10 | maxRPIDsForSetMinPINLength       |
/// | 0x14 | remainingDiscoverableCredentials |
/// | 0x16 | attestationFormats (CTAP 2.2)    |
/// | 0x19 | encIdentifier (CTAP 2.2)         |
/// | 0x1B | pinComplexityPolicy (CTAP 2.2)   |
/// | 0x1D | maxPINLength (CTAP 2.2)          |
/// | 0x1E | encCredStoreState (CTAP 2.2)     |
/// | 0x1F | authenticatorConfigCommands (2.2)|
///
/// Left out, as their absence says what is true of latchkey (CTAP 2.2
/// §6.4): 0x11–0x13 (no UV modality, certifications or preferred platform
/// UV attempts: built-in UV is a consent policy, not a sensor), 0x15
/// vendorPrototypeConfigCommands (none), 0x17 uvCountSinceLastPinEntry
/// (optional; built-in UV has no failure count to report), 0x18
/// longTouchForReset (absent is false), 0x1A transportsForReset (absent is
/// every transport in 0x09) and 0x1C pinComplexityPolicyURL (no policy).
public struct GetInfoResponse: Sendable, CBOREncodable {
    public var versions: [String]
    public var extensions: [String]
    public var aaguid: [UInt8]
    public var options: [(String, Bool)]
    public var maxMsgSize: Int
    /// In order of preference (§6.4).
    public var pinUvAuthProtocols: [UInt64]
    public var maxCredentialCountInList: Int
    public var maxCredentialIdLength: Int
    public var transports: [String]
    public var algorithms: [CredentialParameters]
    public var maxSerializedLargeBlobArray: Int?
    public var forcePINChange: Bool
    public var minPINLength: Int
    public var firmwareVersion: UInt64
    /// Only when credBlob is offered.
    public var maxCredBlobLength: Int?
    public var maxRPIDsForSetMinPINLength: Int
    public var remainingDiscoverableCredentials: Int
    /// The first is what makeCredential returns unless asked for
    /// enterprise attestation.
    public var attestationFormats: [String]
    /// Encrypted to the persistent pinUvAuthToken (Authenticator+PersistentToken.swift).
    public var encIdentifier: [UInt8]?
    /// latchkey enforces no PIN complexity policy beyond minPINLength.
    public var pinComplexityPolicy = false
    /// In Unicode code points; a PIN is also at most that many UTF-8 bytes.
    public var maxPINLength: Int
    public var encCredStoreState: [UInt8]?
    /// The authenticatorConfig subcommands this key accepts.
    public var authenticatorConfigCommands: [UInt64]

    /// The response map.
    public var cbor: CBORValue {
        var entries: [(Int, CBORValue)] = [
            (0x01, .array(versions.map { .text($0) })),
            (0x02, .array(extensions.map { .text($0) })),
            (0x03, .bytes(aaguid)),
            (0x04, .textMap(options.map { ($0.0, .boolean($0.1)) })),
            (0x05, .int(maxMsgSize)),
            (0x06, .array(pinUvAuthProtocols.map { .unsigned($0) })),
            (0x07, .int(maxCredentialCountInList)),
            (0x08, .int(maxCredentialIdLength)),
            (0x09, .array(transports.map { .text($0) })),
            (0x0A, .array(algorithms.map(\.cbor))),
        ]
        if let maxSerializedLargeBlobArray { entries.append((0x0B, .int(maxSerializedLargeBlobArray))) }
        entries += [
            (0x0C, .boolean(forcePINChange)),
            (0x0D, .int(minPINLength)),
            (0x0E, .unsigned(firmwareVersion)),
        ]
        if let maxCredBlobLength { entries.append((0x0F, .int(maxCredBlobLength))) }
        entries += [
            (0x10, .int(maxRPIDsForSetMinPINLength)),
            (0x14, .int(remainingDiscoverableCredentials)),
            (0x16, .array(attestationFormats.map { .text($0) })),
        ]
        if let encIdentifier { entries.append((0x19, .bytes(encIdentifier))) }
        entries += [(0x1B, .boolean(pinComplexityPolicy)), (0x1D, .int(maxPINLength))]
        if let encCredStoreState { entries.append((0x1E, .bytes(encCredStoreState))) }
        entries.append((0x1F, .array(authenticatorConfigCommands.map { .unsigned($0) })))
        return .intMap(entries)
    }
}
