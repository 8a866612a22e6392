// The persistent pinUvAuthToken of CTAP 2.2 (getInfo option perCredMgmtRO):
// a token issued for the pcmr permission alone (clientPIN 0x09 or 0x06,
// permissions 0x40) that lasts across power cycles, so a platform can list
// the key's discoverable credentials — and only list them — without asking
// for the PIN each time the key is plugged in. With it, getInfo carries two
// values only its holder can read:
//
// | getInfo | name              | plaintext |
// |---------|-------------------|-----------|
// | 0x19    | encIdentifier     | the key's identifier (16 random bytes) |
// | 0x1E    | encCredStoreState | a value (16 random bytes) that changes with every change to the discoverable credentials |
//
// each as IV (16 random bytes) || AES-128-CBC(key, IV, plaintext) with
// key = HKDF-SHA-256(salt = 32 zero bytes, IKM = the persistent token,
// info = "encIdentifier" or "encCredStoreState", L = 16). Both are left out
// while no persistent token exists: there is no one to tell them to.
//
// The token works for the read-only credentialManagement subcommands
// (getCredsMetadata, enumerateRPsBegin, enumerateCredentialsBegin, and their
// GetNext); anything else verified with it is CTAP2_ERR_PIN_AUTH_INVALID,
// since it never carries the cm permission.
//
// Persisted in store secrets (sealed at rest; authenticatorReset deletes all
// three, so a reset key has a new identity to its platforms):
//
// | secret                 | value |
// |------------------------|-------|
// | pin.persistentToken    | the token (32 bytes); setPIN and changePIN delete it |
// | ppuat.identifier       | the identifier (16 bytes), made on first use |
// | credentials.storeState | the credential store state (16 bytes), new at every save, update or delete while a persistent token exists, and with every new token |

import LatchkeyCrypto

/// Names and sizes of the persisted state behind the persistent token.
enum PersistentTokenSecret {
    static let identifier = "ppuat.identifier"
    static let credentialStoreState = "credentials.storeState"
    /// Both encrypted values are one AES block.
    static let valueByteCount = 16
    static let encIdentifierInfo = Array("encIdentifier".utf8)
    static let encCredStoreStateInfo = Array("encCredStoreState".utf8)
}

extension Authenticator {
    /// The persistent pinUvAuthToken, if one was issued since the PIN was set
    /// or last changed; with `creating`, a new one when there is none.
    func persistentToken(creating: Bool = false) throws(CTAPStatus) -> [UInt8]? {
        try storedValue(PINSecret.persistentToken, byteCount: PinUvAuthProtocol.tokenByteCount, creating: creating)
    }

    /// Whether `param` is authenticate(persistent token, `message`) under
    /// the request's protocol: the read-only credentialManagement
    /// subcommands accept it in place of a pinUvAuthToken. False whenever
    /// anything is missing, so that the caller's usual checks answer.
    func verifiesWithPersistentToken(_ param: [UInt8]?, protocol raw: UInt64?, message: [UInt8]) throws(CTAPStatus)
        -> Bool
    {
        guard configuration.persistentPinUvAuthToken, let param, let raw,
            let version = PinUvAuthProtocolVersion(rawValue: raw), let token = try persistentToken()
        else { return false }
        return version.verify(key: token, message: message, signature: param)
    }

    /// A discoverable credential was saved, updated or deleted: the state
    /// encCredStoreState tells changes. Only a holder of the persistent token
    /// can read the state, so without one nothing is written (a commit saved on
    /// every discoverable makeCredential); a new token gets a new state
    /// (`newPersistentToken`), so a platform's cache from an earlier token
    /// never matches changes made while there was none.
    func credentialStoreChanged() throws(CTAPStatus) {
        // Whether or not the key offers the token now: one stored while it did
        // must not be left reading a state that missed changes.
        guard try persistentToken() != nil else { return }
        try renewCredentialStoreState()
    }

    /// A new persistent token, and with it a new credential store state.
    func newPersistentToken() throws(CTAPStatus) -> [UInt8] {
        if let token = try persistentToken() { return token }
        let token = try persistentToken(creating: true) ?? []
        try renewCredentialStoreState()
        return token
    }

    private func renewCredentialStoreState() throws(CTAPStatus) {
        let state = entropy.bytes(count: PersistentTokenSecret.valueByteCount)
        try storing("changing the credential store state") { () throws(StoreError) in
            try store.setSecret(state, named: PersistentTokenSecret.credentialStoreState)
        }
    }

    /// getInfo's encIdentifier and encCredStoreState, or nil for both while
    /// there is no persistent token (or the key does not offer it).
    func encryptedIdentity() throws(CTAPStatus) -> (identifier: [UInt8], credentialStoreState: [UInt8])? {
        guard configuration.persistentPinUvAuthToken, let token = try persistentToken() else { return nil }
        let byteCount = PersistentTokenSecret.valueByteCount
        guard let identifier = try storedValue(PersistentTokenSecret.identifier, byteCount: byteCount, creating: true),
            let state = try storedValue(
                PersistentTokenSecret.credentialStoreState, byteCount: byteCount, creating: true
            )
        else { return nil }
        return (
            try encrypt(identifier, token: token, info: PersistentTokenSecret.encIdentifierInfo),
            try encrypt(state, token: token, info: PersistentTokenSecret.encCredStoreStateInfo)
        )
    }

    /// IV || AES-128-CBC(HKDF-SHA-256(token, info), IV, plaintext).
    private func encrypt(_ plaintext: [UInt8], token: [UInt8], info: [UInt8]) throws(CTAPStatus) -> [UInt8] {
        let key = HKDFSHA256.deriveKey(
            inputKeyMaterial: token, salt: PinUvAuthProtocolVersion.hkdfSalt, info: info, outputByteCount: 16
        )
        let iv = entropy.bytes(count: 16)
        return iv + (try signing("encrypting a getInfo value") { () throws(CryptoError) in
            try AES128CBC.encrypt(plaintext, key: key, iv: iv)
        })
    }

    /// A random secret of `byteCount` bytes under `name`; with `creating`,
    /// made and stored when absent. A stored value of another length is
    /// damage: CTAP1_ERR_OTHER.
    private func storedValue(_ name: String, byteCount: Int, creating: Bool) throws(CTAPStatus) -> [UInt8]? {
        if let value = try storing("reading \(name)", { () throws(StoreError) in try store.secret(named: name) }) {
            guard value.count == byteCount else {
                diagnostics?("stored \(name) has \(value.count) bytes")
                throw .other
            }
            return value
        }
        guard creating else { return nil }
        let value = entropy.bytes(count: byteCount)
        try storing("storing \(name)") { () throws(StoreError) in try store.setSecret(value, named: name) }
        return value
    }
}
