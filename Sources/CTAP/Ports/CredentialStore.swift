// The credential store the authenticator engine persists through. The engine
// sees only this protocol; LatchkeyStore implements it over SQLite and
// MemoryCredentialStore implements it for tests and fuzzers.

public import LatchkeyErrors

/// A discoverable credential as the store keeps it.
///
/// Non-discoverable credentials are never stored: their credential ID is the
/// private key wrapped under the key's wrapping secret (see `CredentialWrapper`).
public struct StoredCredential: Sendable, Equatable {
    /// The credential ID the relying party sees (random, 32 bytes).
    public var id: [UInt8]
    /// The relying party identifier (`rp.id`).
    public var rpId: String
    /// SHA-256 of `rpId`.
    public var rpIdHash: [UInt8]
    /// `rp.name`, when the client sent one.
    public var rpName: String?
    /// The user handle (`user.id`, at most 64 bytes).
    public var userId: [UInt8]
    /// `user.name`.
    public var userName: String?
    /// `user.displayName`.
    public var userDisplayName: String?
    /// The COSE algorithm identifier (-7 ES256, -8 EdDSA).
    public var algorithm: Int
    /// The private key: a P-256 scalar or an Ed25519 seed (32 bytes). Plain in
    /// memory; every persistent store encrypts it at rest.
    public var privateKey: [UInt8]
    /// The credProtect level (1, 2 or 3) the credential was made with.
    public var credProtect: UInt8
    /// hmac-secret's CredRandom, when the credential was made with it: the
    /// value used with user verification (32 bytes) then the one without
    /// (32 bytes). Secret; persistent stores encrypt it at rest.
    public var credRandom: [UInt8]?
    /// The credBlob extension's bytes (at most maxCredBlobLength).
    public var credBlob: [UInt8]?
    /// The largeBlobKey extension's key (32 bytes). Secret; persistent stores
    /// encrypt it at rest.
    public var largeBlobKey: [UInt8]?
    /// Whether it was made as a payment credential (the thirdPartyPayment
    /// extension, CTAP 2.2 §12.9).
    public var thirdPartyPayment: Bool
    /// Creation order, assigned by the store on `save`: larger is newer.
    public var sequence: Int64

    public init(
        id: [UInt8],
        rpId: String,
        rpIdHash: [UInt8],
        rpName: String? = nil,
        userId: [UInt8],
        userName: String? = nil,
        userDisplayName: String? = nil,
        algorithm: Int,
        privateKey: [UInt8],
        credProtect: UInt8 = 1,
        credRandom: [UInt8]? = nil,
        credBlob: [UInt8]? = nil,
        largeBlobKey: [UInt8]? = nil,
        thirdPartyPayment: Bool = false,
        sequence: Int64 = 0
    ) {
        self.id = id
        self.rpId = rpId
        self.rpIdHash = rpIdHash
        self.rpName = rpName
        self.userId = userId
        self.userName = userName
        self.userDisplayName = userDisplayName
        self.algorithm = algorithm
        self.privateKey = privateKey
        self.credProtect = credProtect
        self.credRandom = credRandom
        self.credBlob = credBlob
        self.largeBlobKey = largeBlobKey
        self.thirdPartyPayment = thirdPartyPayment
        self.sequence = sequence
    }
}

/// A failure of the store itself (disk, database, decryption), with context for
/// the log. Equal by code, so tests can match it.
public typealias StoreError = CodedError<StoreErrorCode>

/// The kind of a `StoreError`.
public enum StoreErrorCode: String, ErrorCode {
    /// The storage medium is full (ENOSPC, SQLITE_FULL).
    case full
    /// A value read back failed to decrypt or to parse.
    case corrupt
    /// Any other I/O or database failure.
    case io
    /// Another process holds the store.
    case locked

    public var title: String { "store \(rawValue)" }
}

/// Persistent state of one virtual key.
///
/// Durability contract: every mutating call has reached stable storage when it
/// returns, so an answer the engine sends after it survives kill -9 and power
/// loss.
public protocol CredentialStore: Sendable {
    /// Saves a new discoverable credential and assigns its `sequence`. A stored
    /// credential with the same `rpIdHash` and `userId` is replaced (CTAP 2.1
    /// §6.1.2 step 18). Returns the credential as stored.
    @discardableResult
    func save(_ credential: StoredCredential) throws(StoreError) -> StoredCredential

    /// Replaces the mutable fields (user name, display name, rp name) of the
    /// credential with the same ID. Returns false when there is none.
    @discardableResult
    func update(_ credential: StoredCredential) throws(StoreError) -> Bool

    /// The discoverable credentials for one relying party, newest first.
    func credentials(rpIdHash: [UInt8]) throws(StoreError) -> [StoredCredential]

    /// The credential with this ID, if stored.
    func credential(id: [UInt8]) throws(StoreError) -> StoredCredential?

    /// Whether a discoverable credential of this relying party and user is
    /// stored: what a new one would replace. Opens no key, so that
    /// makeCredential's check does not grow with the RP's credentials.
    func containsCredential(rpIdHash: [UInt8], userId: [UInt8]) throws(StoreError) -> Bool

    /// Every stored credential, newest first.
    func allCredentials() throws(StoreError) -> [StoredCredential]

    /// Deletes one credential (and its counter). Returns false when there was none.
    @discardableResult
    func deleteCredential(id: [UInt8]) throws(StoreError) -> Bool

    /// How many discoverable credentials are stored.
    func credentialCount() throws(StoreError) -> Int

    /// The next signature counter value for `scope` (a credential ID, or the
    /// empty scope for credentials that are not stored). Values for one scope
    /// strictly increase and are never returned twice, even across a crash:
    /// persistent stores reserve a block ahead and persist the reservation
    /// before handing out a value from it. Values start at 1.
    func nextSignatureCounter(scope: [UInt8]) throws(StoreError) -> UInt32

    /// Makes every later value for `scope` larger than `value` (an imported
    /// credential continues its counter); never lowers it. Durable on return.
    func raiseSignatureCounter(scope: [UInt8], above value: UInt32) throws(StoreError)

    /// A small secret value (the wrapping secret, PIN state), encrypted at rest
    /// by persistent stores with the name in the AAD.
    func secret(named name: String) throws(StoreError) -> [UInt8]?

    /// Stores or replaces a secret value; `nil` removes it.
    func setSecret(_ value: [UInt8]?, named name: String) throws(StoreError)

    /// authenticatorReset: deletes every credential and every secret except
    /// the device's identity (names starting `device.`: AAGUID, attestation
    /// key), which a hardware key keeps too. Signature counters keep
    /// increasing (a counter value is never reused).
    func reset() throws(StoreError)
}

extension CredentialStore {
    /// By listing the RP's credentials: right for any store; a store with an
    /// index answers without reading them.
    public func containsCredential(rpIdHash: [UInt8], userId: [UInt8]) throws(StoreError) -> Bool {
        try credentials(rpIdHash: rpIdHash).contains { $0.userId == userId }
    }
}
