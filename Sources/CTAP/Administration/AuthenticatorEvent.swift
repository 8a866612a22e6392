// What the engine tells its host about credentials as it works: the daemon
// turns these into control-API events (credential.created, …). Emitted after
// the change is durable, from inside the actor, so the order of events is the
// order of operations.

/// One credential event.
///
/// A struct with a payload-free kind rather than an enum with payloads: the
/// fields overlap, and LeakSanitizer misreads multi-payload enums holding
/// references (see Tests/*/Crashers history).
public struct AuthenticatorEvent: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// makeCredential, or an imported credential.
        case credentialCreated = "credential.created"
        /// getAssertion / getNextAssertion / U2F AUTHENTICATE signed with it.
        case credentialAsserted = "credential.asserted"
        /// Deleted (credential management, the control API, a signal).
        case credentialDeleted = "credential.deleted"
        /// Its user or relying party names changed.
        case credentialUpdated = "credential.updated"
    }

    public var kind: Kind
    public var credentialId: [UInt8]
    /// The relying party ID, when known (U2F knows only its hash).
    public var rpId: String?
    public var userId: [UInt8]?
    public var userName: String?
    public var userDisplayName: String?
    /// Stored (discoverable) rather than wrapped in its ID.
    public var discoverable: Bool
    /// The signature counter of the operation, for created and asserted.
    public var signCount: UInt32?
    /// Whether the operation verified the user.
    public var userVerified: Bool
    /// How it was made, for created: "makeCredential" or "import".
    public var origin: String?

    public init(
        kind: Kind,
        credentialId: [UInt8],
        rpId: String? = nil,
        userId: [UInt8]? = nil,
        userName: String? = nil,
        userDisplayName: String? = nil,
        discoverable: Bool,
        signCount: UInt32? = nil,
        userVerified: Bool = false,
        origin: String? = nil
    ) {
        self.kind = kind
        self.credentialId = credentialId
        self.rpId = rpId
        self.userId = userId
        self.userName = userName
        self.userDisplayName = userDisplayName
        self.discoverable = discoverable
        self.signCount = signCount
        self.userVerified = userVerified
        self.origin = origin
    }

    /// The event for a stored credential.
    init(_ kind: Kind, _ credential: StoredCredential, signCount: UInt32? = nil, userVerified: Bool = false) {
        self.init(
            kind: kind, credentialId: credential.id, rpId: credential.rpId, userId: credential.userId,
            userName: credential.userName, userDisplayName: credential.userDisplayName, discoverable: true,
            signCount: signCount, userVerified: userVerified
        )
    }
}
