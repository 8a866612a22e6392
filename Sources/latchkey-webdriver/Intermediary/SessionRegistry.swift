// Which WebDriver session owns which latchkey keys, and when each session was
// last heard from. A session's keys go when the session is deleted, when the
// intermediary stops, and when the session has been silent (no request, none
// running) for the idle timeout: a test that crashed never deletes its session,
// and its keys would otherwise stay plugged in.

/// What the intermediary knows of the sessions it has seen.
actor SessionRegistry {
    struct Session {
        /// The keys it added, oldest first, with the configuration of each.
        var authenticators: [(id: String, configuration: AuthenticatorConfiguration)] = []
        var lastHeard: ContinuousClock.Instant
        /// Requests of the session still running (a long one is not silence).
        var running = 0
    }

    private var known: Set<String> = []
    private var sessions: [String: Session] = [:]
    private let clock = ContinuousClock()

    /// A session the upstream driver created (its New Session answer).
    func created(_ session: String) {
        known.insert(session)
    }

    func isKnown(_ session: String) -> Bool { known.contains(session) }

    /// A request of `session` starts.
    func begin(_ session: String) {
        guard var state = sessions[session] else { return }
        state.running += 1
        state.lastHeard = clock.now
        sessions[session] = state
    }

    /// A request of `session` ended.
    func end(_ session: String) {
        guard var state = sessions[session] else { return }
        state.running = max(0, state.running - 1)
        state.lastHeard = clock.now
        sessions[session] = state
    }

    func add(_ authenticator: String, configuration: AuthenticatorConfiguration, to session: String) {
        var state = sessions[session] ?? Session(lastHeard: clock.now)
        state.authenticators.append((authenticator, configuration))
        sessions[session] = state
    }

    /// The configuration of `authenticator` if `session` owns it.
    func configuration(of authenticator: String, in session: String) -> AuthenticatorConfiguration? {
        sessions[session]?.authenticators.first { $0.id == authenticator }?.configuration
    }

    /// The keys `session` added.
    func authenticators(of session: String) -> Set<String> {
        Set(sessions[session]?.authenticators.map(\.id) ?? [])
    }

    func remove(_ authenticator: String, from session: String) {
        sessions[session]?.authenticators.removeAll { $0.id == authenticator }
    }

    /// Forgets the session; answers the keys it owned.
    func end(session: String) -> [String] {
        known.remove(session)
        return sessions.removeValue(forKey: session)?.authenticators.map(\.id) ?? []
    }

    /// The sessions silent for `timeout` with keys, forgotten; answers their keys.
    func expire(after timeout: Duration) -> [(session: String, keys: [String])] {
        let now = clock.now
        let silent = sessions.filter { _, state in
            !state.authenticators.isEmpty && state.running == 0 && now - state.lastHeard >= timeout
        }
        for session in silent.keys { sessions.removeValue(forKey: session) }
        return silent.map { ($0.key, $0.value.authenticators.map(\.id)) }
    }

    /// Every key of every session, all forgotten (the intermediary stops).
    func removeAll() -> [String] {
        defer { sessions = [:] }
        return sessions.values.flatMap { $0.authenticators.map(\.id) }
    }
}
