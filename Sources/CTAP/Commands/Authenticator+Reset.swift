// authenticatorReset (0x07), CTAP 2.1 §6.6, and the erasure it shares with
// the control API's reset (Authenticator+Administration.swift).

extension Authenticator {
    // MARK: - authenticatorReset (CTAP 2.1 §6.6)

    func reset() async throws(CTAPStatus) {
        // Only soon after power-up, as hardware keys do, so that malware on the
        // host cannot wipe a key that has been plugged in for a while.
        guard clock.milliseconds - poweredUpAt <= configuration.resetWindowMilliseconds else { throw .notAllowed }
        try await collectPresence(PresenceRequest(operation: .reset))
        try erase()
    }

    /// Erases all but the device's identity, as authenticatorReset does (and
    /// the control API's reset): the store drops credentials, the PIN, its
    /// retries, forcePINChange, the minimum PIN length, alwaysUv and large
    /// blobs with every non-`device.` secret; a new wrapping secret makes
    /// every wrapped credential ID unusable; tokens, key agreement keys and
    /// every sequence in progress go too.
    func erase() throws(CTAPStatus) {
        // Dropped first: a reset that fails halfway must not leave a stale value.
        alwaysUvCache = nil
        wrapper = try storing("resetting the store") { () throws(StoreError) in
            try store.reset()
            return try Self.loadWrapper(store: store, entropy: entropy)
        }
        keyCache.removeAll()
        conversations.removeAll()
        pinUvAuth = PinUvAuthSession(entropy: entropy)
    }
}
