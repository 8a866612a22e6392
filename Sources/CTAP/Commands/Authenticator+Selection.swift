// authenticatorSelection (0x0B), CTAP 2.1 §6.9: a platform with several keys
// asks each for a touch, and the one the user touches is the one it uses.
// The command changes nothing on the key.

extension Authenticator {
    // MARK: - authenticatorSelection (CTAP 2.1 §6.9)

    /// Waits for the user's touch; a refusal, a timeout or the host's cancel
    /// answers with its status, as for any presence (`collectPresence`).
    func selection() async throws(CTAPStatus) {
        try await collectPresence(PresenceRequest(operation: .selection))
    }
}
