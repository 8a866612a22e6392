// The control API's JSON bodies, as latchkeyctl reads and sends them. Only
// human output decodes these; `--json` prints the daemon's bytes as sent.
// Open sets (presence modes, uhid states, operations) stay strings so that a
// newer daemon's values print instead of failing.

import LatchkeyContract

/// `GET /v1/status`.
struct StatusInfo: Decodable {
    var version: String
    var uptimeSeconds: Double
    var keys: [KeyInfo]
}

/// A virtual key: `GET /v1/keys`, `GET /v1/keys/{name}`, `POST /v1/keys`.
struct KeyInfo: Decodable {
    var name: String
    /// The account the key belongs to; absent from older daemons.
    var owner: Owner?
    /// Whether its private keys may leave without its PIN; absent from older daemons.
    var exportable: Bool?
    /// 32 hex digits.
    var aaguid: String
    /// "auto", "prompt" or "deny".
    var presence: String
    /// How many discoverable credentials the key stores.
    var credentials: Int
    var uhid: UHIDInfo
    /// Absent when the key is not exported over USB/IP.
    var usbip: USBIPInfo?
    /// What the key was created with; absent from older daemons.
    var options: Options?

    /// The key options `keys show` prints (the rest stay in `--json`).
    struct Options: Decodable {
        /// IANA names, in preference order.
        var algorithms: [String]?
        var maxDiscoverableCredentials: Int?
    }

    struct Owner: Decodable {
        var uid: UInt32
        var name: String?

        /// "alice", or "uid 1001" for an account without a name.
        var label: String { name ?? "uid \(uid)" }
    }

    struct UHIDInfo: Decodable {
        /// "created", "started", "opened", "closed", "unavailable" or "disabled".
        var state: String
        var hidraw: String?
        var error: String?
    }

    struct USBIPInfo: Decodable {
        var busid: String
        var listen: String
    }
}

/// `POST /v1/keys`: the settings and the feature switches (under their
/// `KeyFeature` names; omitted ones take the daemon's defaults), one JSON object.
typealias CreateKeyRequest = WithFeatureSwitches<CreateKeySettings>

/// A key creation request's settings besides its feature switches.
struct CreateKeySettings: Encodable {
    var name: String
    /// Another account's name or uid (root only); omitted: the caller's own key.
    var owner: String? = nil
    /// Omitted: not exportable.
    var exportable: Bool? = nil
    /// Omitted to take the daemon's default.
    var presence: String?
    var uhid: Bool
    var usbip: Bool
    /// Omitted ones take the daemon's defaults.
    var `protocol`: String?
    var hasUserVerification: Bool?
    var isUserVerified: Bool?
    var enterpriseAttestationRpIds: [String]?
    /// IANA names ("ES256", "RS256", ...), in preference order.
    var algorithms: [String]?
    var maxDiscoverableCredentials: Int?
}

/// A stored credential: `GET /v1/keys/{name}/credentials`.
struct CredentialInfo: Decodable {
    /// base64url without padding.
    var id: String
    var rpId: String
    var rpName: String?
    /// base64url without padding.
    var userId: String
    var userName: String?
    var userDisplayName: String?
    /// A COSE algorithm identifier (-7 ES256, -8 EdDSA, -257 RS256).
    var algorithm: Int
    /// The credProtect level, 1 to 3.
    var credProtect: Int?
}

/// `GET` and `PUT /v1/keys/{name}/presence`.
struct PresenceSettings: Decodable {
    var mode: String
    var timeoutSeconds: Double?
}

/// `PUT /v1/keys/{name}/presence`: either field may be left out.
struct PresenceUpdate: Encodable {
    var mode: String?
    var timeoutSeconds: Int?
}

/// `PUT /v1/keys/{name}/credentials/{id}/user`: a field left out keeps its
/// value, an empty one removes it.
struct UserUpdate: Encodable {
    var name: String?
    var displayName: String?
}

/// `GET` and `PUT /v1/keys/{name}/pin`.
struct PINInfo: Decodable {
    var set: Bool
    var retries: Int
    var maxRetries: Int?
    var blocked: Bool
    var powerCycleRequired: Bool
    var minPINLength: Int
    var forcePINChange: Bool
    var alwaysUv: Bool
}

/// `PUT /v1/keys/{name}/pin`: `newPin` alone sets the first PIN, with
/// `currentPin` it changes it.
struct PINUpdate: Encodable {
    var currentPin: String?
    var newPin: String
}

/// `GET` and `PUT /v1/keys/{name}/config`; fields left out of a PUT stay.
struct ConfigInfo: Codable {
    var alwaysUv: Bool?
    var minPINLength: Int?
    var forcePINChange: Bool?
    /// The RP IDs told the minimum PIN length; a PUT replaces them.
    var minPinLengthRPIDs: [String]?
}

/// `GET /v1/keys/{name}/large-blobs`.
struct LargeBlobsInfo: Decodable {
    var serializedSize: Int
    var maxSerializedLargeBlobArray: Int
}

/// A request waiting for user presence: `GET /v1/presence/pending`.
struct PendingRequest: Decodable {
    var id: String
    var key: String
    /// "makeCredential", "getAssertion", "u2fRegister", ...
    var operation: String
    var rpId: String?
    var userName: String?
    /// Built-in user verification asked for (absent from older daemons).
    var userVerification: Bool?
    var ageMs: Double
    var expiresInMs: Double
}

/// `POST /v1/presence/pending/{id}/approve` and `.../deny`.
struct PresenceDecision: Decodable {
    var id: String
    /// "approved" or "denied".
    var outcome: String
}
