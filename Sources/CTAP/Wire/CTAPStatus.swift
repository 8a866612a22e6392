// CTAP status codes (CTAP 2.1 §8.2 "Status codes"): the first byte of every
// authenticator response. An open set of wire values, so a struct of static
// lets rather than an enum.

/// A CTAP response status. Handlers throw it (`throws(CTAPStatus)`); the
/// dispatcher writes it as the response's first byte.
public struct CTAPStatus: RawRepresentable, Hashable, Sendable, Error, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// CTAP2_OK (0x00)
    public static let ok = CTAPStatus(rawValue: 0x00)
    /// CTAP1_ERR_INVALID_COMMAND (0x01)
    public static let invalidCommand = CTAPStatus(rawValue: 0x01)
    /// CTAP1_ERR_INVALID_PARAMETER (0x02)
    public static let invalidParameter = CTAPStatus(rawValue: 0x02)
    /// CTAP1_ERR_INVALID_LENGTH (0x03)
    public static let invalidLength = CTAPStatus(rawValue: 0x03)
    /// CTAP1_ERR_INVALID_SEQ (0x04)
    public static let invalidSequence = CTAPStatus(rawValue: 0x04)
    /// CTAP1_ERR_TIMEOUT (0x05)
    public static let timeout = CTAPStatus(rawValue: 0x05)
    /// CTAP1_ERR_CHANNEL_BUSY (0x06)
    public static let channelBusy = CTAPStatus(rawValue: 0x06)
    /// CTAP1_ERR_LOCK_REQUIRED (0x0A)
    public static let lockRequired = CTAPStatus(rawValue: 0x0A)
    /// CTAP1_ERR_INVALID_CHANNEL (0x0B)
    public static let invalidChannel = CTAPStatus(rawValue: 0x0B)
    /// CTAP2_ERR_CBOR_UNEXPECTED_TYPE (0x11)
    public static let cborUnexpectedType = CTAPStatus(rawValue: 0x11)
    /// CTAP2_ERR_INVALID_CBOR (0x12)
    public static let invalidCBOR = CTAPStatus(rawValue: 0x12)
    /// CTAP2_ERR_MISSING_PARAMETER (0x14)
    public static let missingParameter = CTAPStatus(rawValue: 0x14)
    /// CTAP2_ERR_LIMIT_EXCEEDED (0x15)
    public static let limitExceeded = CTAPStatus(rawValue: 0x15)
    /// CTAP2_ERR_LARGE_BLOB_STORAGE_FULL (0x18)
    public static let largeBlobStorageFull = CTAPStatus(rawValue: 0x18)
    /// CTAP2_ERR_CREDENTIAL_EXCLUDED (0x19)
    public static let credentialExcluded = CTAPStatus(rawValue: 0x19)
    /// CTAP2_ERR_PROCESSING (0x21)
    public static let processing = CTAPStatus(rawValue: 0x21)
    /// CTAP2_ERR_INVALID_CREDENTIAL (0x22)
    public static let invalidCredential = CTAPStatus(rawValue: 0x22)
    /// CTAP2_ERR_USER_ACTION_PENDING (0x23)
    public static let userActionPending = CTAPStatus(rawValue: 0x23)
    /// CTAP2_ERR_OPERATION_PENDING (0x24)
    public static let operationPending = CTAPStatus(rawValue: 0x24)
    /// CTAP2_ERR_NO_OPERATIONS (0x25)
    public static let noOperations = CTAPStatus(rawValue: 0x25)
    /// CTAP2_ERR_UNSUPPORTED_ALGORITHM (0x26)
    public static let unsupportedAlgorithm = CTAPStatus(rawValue: 0x26)
    /// CTAP2_ERR_OPERATION_DENIED (0x27)
    public static let operationDenied = CTAPStatus(rawValue: 0x27)
    /// CTAP2_ERR_KEY_STORE_FULL (0x28)
    public static let keyStoreFull = CTAPStatus(rawValue: 0x28)
    /// CTAP2_ERR_NO_OPERATION_PENDING (0x2A)
    public static let noOperationPending = CTAPStatus(rawValue: 0x2A)
    /// CTAP2_ERR_UNSUPPORTED_OPTION (0x2B)
    public static let unsupportedOption = CTAPStatus(rawValue: 0x2B)
    /// CTAP2_ERR_INVALID_OPTION (0x2C)
    public static let invalidOption = CTAPStatus(rawValue: 0x2C)
    /// CTAP2_ERR_KEEPALIVE_CANCEL (0x2D)
    public static let keepaliveCancel = CTAPStatus(rawValue: 0x2D)
    /// CTAP2_ERR_NO_CREDENTIALS (0x2E)
    public static let noCredentials = CTAPStatus(rawValue: 0x2E)
    /// CTAP2_ERR_USER_ACTION_TIMEOUT (0x2F)
    public static let userActionTimeout = CTAPStatus(rawValue: 0x2F)
    /// CTAP2_ERR_NOT_ALLOWED (0x30)
    public static let notAllowed = CTAPStatus(rawValue: 0x30)
    /// CTAP2_ERR_PIN_INVALID (0x31)
    public static let pinInvalid = CTAPStatus(rawValue: 0x31)
    /// CTAP2_ERR_PIN_BLOCKED (0x32)
    public static let pinBlocked = CTAPStatus(rawValue: 0x32)
    /// CTAP2_ERR_PIN_AUTH_INVALID (0x33)
    public static let pinAuthInvalid = CTAPStatus(rawValue: 0x33)
    /// CTAP2_ERR_PIN_AUTH_BLOCKED (0x34)
    public static let pinAuthBlocked = CTAPStatus(rawValue: 0x34)
    /// CTAP2_ERR_PIN_NOT_SET (0x35)
    public static let pinNotSet = CTAPStatus(rawValue: 0x35)
    /// CTAP2_ERR_PUAT_REQUIRED (0x36), CTAP2_ERR_PIN_REQUIRED in CTAP 2.0
    public static let pinUvAuthTokenRequired = CTAPStatus(rawValue: 0x36)
    /// CTAP2_ERR_PIN_POLICY_VIOLATION (0x37)
    public static let pinPolicyViolation = CTAPStatus(rawValue: 0x37)
    /// CTAP2_ERR_REQUEST_TOO_LARGE (0x39)
    public static let requestTooLarge = CTAPStatus(rawValue: 0x39)
    /// CTAP2_ERR_ACTION_TIMEOUT (0x3A)
    public static let actionTimeout = CTAPStatus(rawValue: 0x3A)
    /// CTAP2_ERR_UP_REQUIRED (0x3B)
    public static let upRequired = CTAPStatus(rawValue: 0x3B)
    /// CTAP2_ERR_UV_BLOCKED (0x3C)
    public static let uvBlocked = CTAPStatus(rawValue: 0x3C)
    /// CTAP2_ERR_INTEGRITY_FAILURE (0x3D)
    public static let integrityFailure = CTAPStatus(rawValue: 0x3D)
    /// CTAP2_ERR_INVALID_SUBCOMMAND (0x3E)
    public static let invalidSubcommand = CTAPStatus(rawValue: 0x3E)
    /// CTAP2_ERR_UV_INVALID (0x3F)
    public static let uvInvalid = CTAPStatus(rawValue: 0x3F)
    /// CTAP2_ERR_UNAUTHORIZED_PERMISSION (0x40)
    public static let unauthorizedPermission = CTAPStatus(rawValue: 0x40)
    /// CTAP1_ERR_OTHER (0x7F)
    public static let other = CTAPStatus(rawValue: 0x7F)

    public var description: String {
        let hex = String(rawValue, radix: 16, uppercase: true)
        return "CTAPStatus(0x\(rawValue < 0x10 ? "0" : "")\(hex))"
    }
}

/// The CTAP2 command byte that starts every CTAPHID_CBOR request (CTAP 2.1 §6).
public enum CTAPCommand: UInt8, Sendable {
    /// authenticatorMakeCredential
    case makeCredential = 0x01
    /// authenticatorGetAssertion
    case getAssertion = 0x02
    /// authenticatorGetInfo
    case getInfo = 0x04
    /// authenticatorClientPIN
    case clientPIN = 0x06
    /// authenticatorReset
    case reset = 0x07
    /// authenticatorGetNextAssertion
    case getNextAssertion = 0x08
    /// authenticatorBioEnrollment
    case bioEnrollment = 0x09
    /// authenticatorCredentialManagement
    case credentialManagement = 0x0A
    /// authenticatorSelection
    case selection = 0x0B
    /// authenticatorLargeBlobs
    case largeBlobs = 0x0C
    /// authenticatorConfig
    case config = 0x0D
    /// Prototype authenticatorBioEnrollment (FIDO_2_1_PRE)
    case bioEnrollmentPreview = 0x40
    /// Prototype authenticatorCredentialManagement (FIDO_2_1_PRE)
    case credentialManagementPreview = 0x41
}
