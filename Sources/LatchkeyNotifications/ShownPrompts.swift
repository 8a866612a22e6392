// The prompts the notifier shows, as a value the bus thread changes and the tests
// drive without a bus: each waiting request's text and deadline, and which server
// shows its notification under which id. A click counts only from the server that
// showed that notification; a server that goes away loses its notifications, and
// the prompts still waiting are shown again by the next one (a server started after
// the notifier, dunst restarted, the session bus back after a restart).

/// The notifier's prompts. Times are milliseconds of one monotonic clock.
struct ShownPrompts {
    struct Prompt: Equatable {
        var summary: String
        /// In the markup of the Desktop Notifications Specification (PromptText).
        var body: String
        /// When the request times out: it is not shown after that.
        var deadline: Int64
        /// Where it is shown now, or nil (not yet, or its server went away).
        var shown: Notification?
    }

    /// A notification a server shows: its id and the server's unique bus name.
    struct Notification: Hashable {
        var id: UInt32
        var server: String
    }

    /// A person's answer in a notification: the request and the action key they chose.
    struct Answer: Equatable {
        var requestId: String
        var action: String
    }

    private(set) var prompts: [String: Prompt] = [:]

    /// A new prompt for `requestId` (again: the same prompt, left as it is).
    mutating func add(requestId: String, summary: String, body: String, deadline: Int64) {
        guard prompts[requestId] == nil else { return }
        prompts[requestId] = Prompt(summary: summary, body: body, deadline: deadline)
    }

    /// The prompts to show now, oldest deadline first: those shown nowhere whose
    /// request has not timed out. Those that have are dropped.
    mutating func waiting(now: Int64) -> [(requestId: String, prompt: Prompt)] {
        prompts = prompts.filter { $0.value.shown != nil || $0.value.deadline > now }
        return prompts.filter { $0.value.shown == nil }.map { ($0.key, $0.value) }
            .sorted { ($0.prompt.deadline, $0.requestId) < ($1.prompt.deadline, $1.requestId) }
    }

    /// The server shows the prompt of `requestId` as `notification`.
    mutating func shown(requestId: String, as notification: Notification) {
        prompts[requestId]?.shown = notification
    }

    /// The request ended: its prompt goes; its notification, if shown, is to be closed.
    mutating func remove(requestId: String) -> Notification? {
        prompts.removeValue(forKey: requestId)?.shown
    }

    /// What a signal from the bus means: the request and the action a person chose,
    /// for a click on a notification of ours from the server that shows it. A click
    /// or a close ends the prompt here (a dismissed notification is not shown again;
    /// the request waits for another answer); a server that left drops its
    /// notifications, so that the next server shows their prompts.
    mutating func receive(_ signal: BusSignal) -> Answer? {
        switch signal {
        case .actionInvoked(let id, let action, let sender):
            guard let requestId = request(shownAs: Notification(id: id, server: sender)) else { return nil }
            prompts[requestId] = nil
            return Answer(requestId: requestId, action: action)
        case .notificationClosed(let id, let sender):
            if let requestId = request(shownAs: Notification(id: id, server: sender)) { prompts[requestId] = nil }
            return nil
        case .serverChanged(let old, _):
            if !old.isEmpty { forgetNotifications { $0.server == old } }
            return nil
        }
    }

    /// The bus went away, and every server on it: nothing is shown anywhere.
    mutating func disconnected() {
        forgetNotifications { _ in true }
    }

    private func request(shownAs notification: Notification) -> String? {
        prompts.first { $0.value.shown == notification }?.key
    }

    private mutating func forgetNotifications(where gone: (Notification) -> Bool) {
        for (requestId, prompt) in prompts where prompt.shown.map(gone) == true {
            prompts[requestId]?.shown = nil
        }
    }
}
