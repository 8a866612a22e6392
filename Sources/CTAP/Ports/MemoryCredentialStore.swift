// An in-memory CredentialStore for tests, fuzzers and benchmarks: the same
// contract as the SQLite store, minus durability.

import Synchronization

/// A credential store that lives in memory. Its optional `capacity` makes
/// `save` fail as a full disk would, so tests can reach CTAP2_ERR_KEY_STORE_FULL.
public final class MemoryCredentialStore: CredentialStore {
    private struct State {
        var credentials: [StoredCredential] = []
        var nextSequence: Int64 = 1
        var counters: [[UInt8]: UInt32] = [:]
        var secrets: [String: [UInt8]] = [:]
    }

    private let state = Mutex(State())
    private let capacity: Int?

    /// An empty store; `capacity` limits how many credentials `save` accepts.
    public init(capacity: Int? = nil) {
        self.capacity = capacity
    }

    @discardableResult
    public func save(_ credential: StoredCredential) throws(StoreError) -> StoredCredential {
        let result: Result<StoredCredential, StoreError> = state.withLock { state in
            let replacing = state.credentials.contains {
                $0.rpIdHash == credential.rpIdHash && $0.userId == credential.userId
            }
            if let capacity, !replacing, state.credentials.count >= capacity {
                return .failure(StoreError(.full, "memory store holds \(capacity) credentials"))
            }
            state.credentials.removeAll { $0.rpIdHash == credential.rpIdHash && $0.userId == credential.userId }
            var stored = credential
            stored.sequence = state.nextSequence
            state.nextSequence += 1
            state.credentials.append(stored)
            return .success(stored)
        }
        return try result.get()
    }

    @discardableResult
    public func update(_ credential: StoredCredential) throws(StoreError) -> Bool {
        state.withLock { state in
            guard let index = state.credentials.firstIndex(where: { $0.id == credential.id }) else { return false }
            state.credentials[index].userName = credential.userName
            state.credentials[index].userDisplayName = credential.userDisplayName
            state.credentials[index].rpName = credential.rpName
            return true
        }
    }

    public func credentials(rpIdHash: [UInt8]) throws(StoreError) -> [StoredCredential] {
        state.withLock { state in
            state.credentials.filter { $0.rpIdHash == rpIdHash }.sorted { $0.sequence > $1.sequence }
        }
    }

    public func credential(id: [UInt8]) throws(StoreError) -> StoredCredential? {
        state.withLock { state in state.credentials.first { $0.id == id } }
    }

    public func allCredentials() throws(StoreError) -> [StoredCredential] {
        state.withLock { state in state.credentials.sorted { $0.sequence > $1.sequence } }
    }

    @discardableResult
    public func deleteCredential(id: [UInt8]) throws(StoreError) -> Bool {
        state.withLock { state in
            let before = state.credentials.count
            state.credentials.removeAll { $0.id == id }
            state.counters[id] = nil
            return state.credentials.count != before
        }
    }

    public func credentialCount() throws(StoreError) -> Int {
        state.withLock { $0.credentials.count }
    }

    public func raiseSignatureCounter(scope: [UInt8], above value: UInt32) throws(StoreError) {
        state.withLock { state in
            state.counters[scope] = max(state.counters[scope, default: 0], value)
        }
    }

    public func nextSignatureCounter(scope: [UInt8]) throws(StoreError) -> UInt32 {
        let result: Result<UInt32, StoreError> = state.withLock { state in
            let current = state.counters[scope, default: 0]
            guard current < UInt32.max else {
                return .failure(StoreError(.io, "signature counter exhausted"))
            }
            state.counters[scope] = current + 1
            return .success(current + 1)
        }
        return try result.get()
    }

    public func secret(named name: String) throws(StoreError) -> [UInt8]? {
        state.withLock { $0.secrets[name] }
    }

    public func setSecret(_ value: [UInt8]?, named name: String) throws(StoreError) {
        state.withLock { $0.secrets[name] = value }
    }

    public func reset() throws(StoreError) {
        state.withLock { state in
            state.credentials.removeAll()
            state.secrets = state.secrets.filter { $0.key.hasPrefix("device.") }
            let global = state.counters[[]]
            state.counters.removeAll()
            state.counters[[]] = global
        }
    }
}
