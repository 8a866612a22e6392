// The key core's read models: what it answers about keys, credentials, PINs and
// presence, and the requests it takes, as Codable values. The control API sends and
// reads them as its JSON documents (/v1), but nothing here knows HTTP: statuses and
// the error document are the control API's (LatchkeyDaemon/Control/ErrorMapping.swift).
// Byte strings are base64url without padding; field names are camelCase.

import CTAP
import Foundation
import LatchkeyContract
import LatchkeyJSON

/// A key as the control API shows it.
public struct KeyDocument: Codable, Sendable, Equatable {
    public struct UHIDStatus: Codable, Sendable, Equatable {
        public var state: UHIDState
        /// The hidraw node the kernel made for the key, once found.
        public var hidraw: String?
        /// Why the device is unavailable, if it is.
        public var error: String?

        public init(state: UHIDState, hidraw: String? = nil, error: String? = nil) {
            self.state = state
            self.hidraw = hidraw
            self.error = error
        }
    }

    public struct USBIPStatus: Codable, Sendable, Equatable {
        /// The bus id to `usbip attach -b`.
        public var busid: String
        /// Where the server listens.
        public var listen: String
        /// Whether a host has imported the device.
        public var attached: Bool

        public init(busid: String, listen: String, attached: Bool) {
            self.busid = busid
            self.listen = listen
            self.attached = attached
        }
    }

    /// The account a key belongs to (docs/access.md).
    public struct Owner: Codable, Sendable, Equatable {
        public var uid: UInt32
        /// The account's name, when the password database has one.
        public var name: String?

        init(uid: UInt32) {
            self.uid = uid
            name = AccountNames.name(of: uid)
        }
    }

    public var name: String
    public var owner: Owner
    /// Whether its private keys may leave without its PIN (set when it was made).
    public var exportable: Bool
    public var aaguid: String
    public var presence: String
    public var credentials: Int
    public var uhid: UHIDStatus
    public var usbip: USBIPStatus?
    /// What the key was created with (POST /v1/keys options).
    public var options: KeyOptionsDocument?
}

/// Where a key's uhid device stands, as the kernel last told it.
public enum UHIDState: String, Codable, Sendable, Equatable {
    /// The key gets no uhid device (`uhid = false`).
    case disabled
    /// The daemon cannot make uhid devices (no /dev/uhid, no permission), or this one
    /// could not be made; the status's `error` says why.
    case unavailable
    /// Made; the kernel has not started it yet.
    case created
    /// The kernel started it (UHID_START).
    case started
    /// A host opened its hidraw node (UHID_OPEN).
    case opened
    /// The last host closed its hidraw node (UHID_CLOSE).
    case closed
    /// The kernel stopped it (UHID_STOP).
    case stopped
    /// Reading it failed; the status's `error` says how.
    case failed
    /// Destroyed: the key was detached, or is being plugged in again.
    case destroyed
}

/// What a key was made with: its protocol, user verification, its feature
/// switches under their `KeyFeature` option names (WebDriver's where WebAuthn §11
/// has one: hasResidentKey, hasLargeBlob, ...), algorithms and limits: one JSON
/// object.
public typealias KeyOptionsDocument = WithFeatureSwitches<KeyOptions>

/// A key's options besides its feature switches.
public struct KeyOptions: Codable, Sendable, Equatable {
    /// "ctap2.1" or "u2f-only".
    public var `protocol`: String
    public var hasUserVerification: Bool
    /// Whether built-in user verification may succeed (the policy's
    /// user-verification decides how).
    public var isUserVerified: Bool
    /// The RP IDs vendor-facilitated enterprise attestation serves.
    public var enterpriseAttestationRpIds: [String]
    /// The credential algorithms offered, in preference order (IANA names).
    public var algorithms: [String]
    /// How many discoverable credentials the key holds before it is full.
    public var maxDiscoverableCredentials: Int
}

extension WithFeatureSwitches where Settings == KeyOptions {
    init(_ key: KeyConfiguration, presence: PresenceBroker) {
        self.init(
            KeyOptions(
                protocol: key.protocolMode.rawValue,
                hasUserVerification: presence.builtInUserVerification,
                isUserVerified: presence.builtInUserVerification && presence.isUserVerified,
                enterpriseAttestationRpIds: key.enterpriseAttestationRpIds,
                algorithms: key.algorithms.map(\.name),
                maxDiscoverableCredentials: key.maxDiscoverableCredentials
            ),
            features: KeyFeatureSwitches(key.features)
        )
    }
}

/// GET /v1/status
public struct StatusDocument: Codable, Sendable {
    public var version: String
    public var uptimeSeconds: Int
    public var stateDirectory: String
    public var keys: [KeyDocument]

    public init(version: String, uptimeSeconds: Int, stateDirectory: String, keys: [KeyDocument]) {
        self.version = version
        self.uptimeSeconds = uptimeSeconds
        self.stateDirectory = stateDirectory
        self.keys = keys
    }
}

/// POST /v1/keys, and what key.json remembers of a key made through the API.
/// The feature switches take their `KeyFeature` option names (WebDriver's,
/// WebAuthn §11, where it has them); left out, a key has each feature's default
/// and no user verification. The settings and the switches are one JSON object.
public typealias CreateKeyRequest = WithFeatureSwitches<CreateKeySettings>

/// A key creation request's settings besides its feature switches.
public struct CreateKeySettings: Codable, Sendable {
    public var name: String
    /// The account the key is for: the caller's own when left out; another
    /// only for root. key.json holds the uid it named.
    public var owner: AccountReference?
    /// Whether its private keys may leave without its PIN (export,
    /// ?privateKey=true); default false. Never changed afterwards.
    public var exportable: Bool?
    public var presence: PresenceMode?
    public var uhid: Bool?
    public var usbip: Bool?
    public var attestation: String?
    /// The key's changes to the daemon's `[policy]`, as in `[keys.policy]`.
    public var policy: PolicyOverrides?
    /// "ctap2.1" (default) or "u2f-only"; WebDriver's "ctap2", "ctap2_1" and
    /// "ctap1/u2f" are accepted too.
    public var `protocol`: String?
    /// Built-in user verification: true sets the policy's user-verification
    /// to auto (presence auto) or prompt, false to deny, unless `policy`
    /// names it.
    public var hasUserVerification: Bool?
    /// Whether built-in user verification may succeed (default true: the
    /// policy decides); false makes it fail.
    public var isUserVerified: Bool?
    /// WebDriver's isUserConsenting: false makes the presence mode `deny`
    /// unless `presence` says otherwise.
    public var isUserConsenting: Bool?
    public var enterpriseAttestationRpIds: [String]?
    /// The credential algorithms to offer, in preference order: IANA names
    /// ("ES256", "RS256", ...); left out, all of them in the default order.
    public var algorithms: [String]?
    /// How many discoverable credentials the key holds before it is full:
    /// 1 to 100,000; left out, 1000.
    public var maxDiscoverableCredentials: Int?
}

extension WithFeatureSwitches where Settings == CreateKeySettings {
    public init(name: String) { self.init(CreateKeySettings(name: name)) }

    /// The protocol mode `protocol` names; nil for a name it is not.
    package static func protocolMode(_ name: String?) -> ProtocolMode? {
        switch name {
        case nil, "ctap2.1", "ctap2", "ctap2_1": .ctap21
        case "u2f-only", "ctap1/u2f", "u2f": .u2fOnly
        default: nil
        }
    }
}

/// PUT /v1/keys/{name}/user-verified, and its answer.
public struct UserVerifiedDocument: Codable, Sendable, Equatable {
    public var isUserVerified: Bool
}

/// A stored credential: WebDriver's Credential (WebAuthn §11 "Credential
/// Parameters": credentialId, isResidentCredential, rpId, privateKey,
/// userHandle, signCount, largeBlob) and latchkey's own fields (`id` and
/// `userId` repeat credentialId and userHandle).
public struct CredentialDocument: Codable, Sendable, Equatable {
    public var id: String
    public var credentialId: String
    public var isResidentCredential: Bool
    public var rpId: String
    public var rpName: String?
    public var userId: String
    public var userHandle: String
    public var userName: String?
    public var userDisplayName: String?
    public var algorithm: Int
    public var credProtect: Int
    /// The last signature counter value it signed with, when the daemon knows it.
    public var signCount: Int?
    /// base64url PKCS#8; only with ?privateKey=true.
    public var privateKey: String?
    /// base64url; only when the key holds a large blob for it and it was asked for.
    public var largeBlob: String?

    init(_ credential: StoredCredential) {
        self.init(credential, signCount: nil)
    }

    init(_ credential: StoredCredential, signCount: Int?) {
        id = Base64URL.encode(credential.id)
        credentialId = id
        isResidentCredential = true
        rpId = credential.rpId
        rpName = credential.rpName
        userId = Base64URL.encode(credential.userId)
        userHandle = userId
        userName = credential.userName
        userDisplayName = credential.userDisplayName
        algorithm = credential.algorithm
        credProtect = Int(credential.credProtect)
        self.signCount = signCount
    }

    /// A non-discoverable credential the key just wrapped (nothing is stored).
    init(nonResident credentialId: [UInt8], rpId: String, userHandle: [UInt8], algorithm: Int, signCount: Int?) {
        id = Base64URL.encode(credentialId)
        self.credentialId = id
        isResidentCredential = false
        self.rpId = rpId
        userId = Base64URL.encode(userHandle)
        self.userHandle = userId
        self.algorithm = algorithm
        credProtect = 1
        self.signCount = signCount
    }
}

/// GET/PUT /v1/keys/{name}/presence
public struct PresenceDocument: Codable, Sendable, Equatable {
    public var mode: PresenceMode?
    public var timeoutSeconds: Int?
}

extension PresenceDocument {
    /// A broker's settings as the API shows them.
    init(_ settings: PresenceBroker.Settings) {
        self.init(mode: settings.mode, timeoutSeconds: settings.timeoutSeconds)
    }
}

/// PUT /v1/keys/{name}/credentials/{id}/user: a field left out (or null)
/// keeps its value, an empty one removes it.
public struct UserUpdateRequest: Codable, Sendable {
    public var name: String?
    public var displayName: String?
}

/// GET /v1/keys/{name}/pin, and the answer to PUT.
public struct PINDocument: Codable, Sendable, Equatable {
    public var set: Bool
    public var retries: Int
    public var maxRetries: Int
    /// No retries left: only a reset makes the key usable with a PIN again.
    public var blocked: Bool
    /// Three wrong PINs in a row: no attempt until the key is plugged in again.
    public var powerCycleRequired: Bool
    public var minPINLength: Int
    public var forcePINChange: Bool
    public var alwaysUv: Bool

    init(_ status: PINStatus) {
        set = status.isSet
        retries = status.retries
        maxRetries = status.maxRetries
        blocked = status.isBlocked
        powerCycleRequired = status.powerCycleRequired
        minPINLength = status.minPINLength
        forcePINChange = status.forcePINChange
        alwaysUv = status.alwaysUv
    }
}

/// PUT /v1/keys/{name}/pin: `newPin` alone sets the first PIN; with
/// `currentPin` it changes the PIN. Never logged.
public struct PINRequest: Codable, Sendable {
    public var currentPin: String?
    public var newPin: String
}

/// GET and PUT /v1/keys/{name}/config; every field is optional in a PUT.
public struct ConfigDocument: Codable, Sendable, Equatable {
    /// Never in an answer; a PUT that names it is refused: a key's
    /// `exportable` is chosen when it is made (POST /v1/keys) and never changes.
    public var exportable: Bool?
    public var alwaysUv: Bool?
    /// Never decreases; at most 63.
    public var minPINLength: Int?
    /// Only true may be sent: changing the PIN is what clears it.
    public var forcePINChange: Bool?
    /// The RP IDs the minPinLength extension tells the minimum to; a PUT
    /// replaces the list.
    public var minPinLengthRPIDs: [String]?
}

extension ConfigDocument {
    /// The settings part of the key's PIN status.
    init(_ status: PINStatus) {
        self.init(
            exportable: nil,
            alwaysUv: status.alwaysUv,
            minPINLength: status.minPINLength,
            forcePINChange: status.forcePINChange,
            minPinLengthRPIDs: status.minPinLengthRPIDs
        )
    }
}

/// GET /v1/keys/{name}/large-blobs
public struct LargeBlobsDocument: Codable, Sendable, Equatable {
    /// Bytes the serialized large-blob array takes (17 when empty).
    public var serializedSize: Int
    public var maxSerializedLargeBlobArray: Int
}

extension LargeBlobsDocument {
    init(_ status: LargeBlobStatus) {
        self.init(
            serializedSize: status.serializedSize,
            maxSerializedLargeBlobArray: status.maxSerializedLargeBlobArray
        )
    }
}

/// POST /v1/presence/pending/{id}/approve|deny
public struct PresenceAnswerDocument: Codable, Sendable {
    public var id: String
    public var outcome: String

    public init(id: String, outcome: String) {
        self.id = id
        self.outcome = outcome
    }
}

/// An account as a request names it: a user name, or a uid as a number (or
/// as a string of digits).
public enum AccountReference: Codable, Sendable, Equatable, CustomStringConvertible {
    case name(String)
    case uid(UInt32)

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let uid = try? container.decode(UInt32.self) {
            self = .uid(uid)
        } else {
            self = .name(try container.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .name(let name): try container.encode(name)
        case .uid(let uid): try container.encode(uid)
        }
    }

    /// The uid it names, nil for a name the password database does not know
    /// or for (uid_t)-1, which is no account.
    public var uid: UInt32? {
        let uid: UInt32? =
            switch self {
            case .uid(let uid): uid
            case .name(let name): AccountNames.uid(of: name)
            }
        return uid == Caller.unidentified.uid ? nil : uid
    }

    public var description: String {
        switch self {
        case .name(let name): name
        case .uid(let uid): "\(uid)"
        }
    }
}

/// GET/PUT /v1/keys/{name}/policy
package struct PolicyDocument: Codable, Sendable, Equatable {
    struct Signal: Codable, Sendable, Equatable {
        var rpId: String
        var userName: String
        var expiresInMs: Int
    }

    var presence: PresenceMode
    var userVerification: UserVerificationPolicy
    var notifications: Bool
    var conditionalRegistration: Bool
    var signalWindowSeconds: Int
    var onMismatch: MismatchAction
    var allowRpIds: [String]
    var denyRpIds: [String]
    var requirePin: Bool
    var rateLimitPerHour: Int
    var promptsPerMinute: Int
    var denyCooldownSeconds: Int
    /// The password-used windows open now.
    var openSignals: [Signal]

    init(_ broker: PresenceBroker) {
        let settings = broker.policySettings
        let now = broker.now
        presence = broker.current.mode
        userVerification = settings.userVerification
        notifications = settings.notifications
        conditionalRegistration = settings.conditionalRegistration
        signalWindowSeconds = settings.signalWindowSeconds
        onMismatch = settings.onMismatch
        allowRpIds = settings.allowRpIds
        denyRpIds = settings.denyRpIds
        requirePin = settings.requirePin
        rateLimitPerHour = settings.rateLimitPerHour
        promptsPerMinute = settings.promptsPerMinute
        denyCooldownSeconds = settings.denyCooldownSeconds
        openSignals = broker.openSignals().map {
            Signal(rpId: $0.rpId, userName: $0.userName, expiresInMs: Int($0.expiresAt > now ? $0.expiresAt - now : 0))
        }
    }
}

/// POST /v1/keys/{name}/signals/password-used
package struct PasswordUsedRequest: Codable, Sendable {
    var rpId: String
    var userName: String
}

/// The answer to a password-used signal: the window it opened.
package struct PasswordUsedDocument: Codable, Sendable {
    var key: String
    var rpId: String
    var userName: String
    var expiresInMs: Int
}
