// Conversation state: what a multi-step exchange keeps between its requests —
// a getAssertion's remaining credentials for getNextAssertion (CTAP 2.1
// §6.3), a credentialManagement enumeration for its GetNext (§6.8.3,
// §6.8.4), a large-blob array arriving in fragments (§6.10.2) — bound to the
// conversation that began it. A key serves several conversations at once:
// the CTAPHID channels of a transport connection (two programs, or a browser
// that opens a channel per request), and several connections (a uhid device
// and a USB/IP import of the same key). One client's "next" must never
// continue another's: it finds no state of its own and gets the status the
// spec gives for that (CTAP2_ERR_NOT_ALLOWED, CTAP1_ERR_INVALID_SEQ).

/// Where a request comes from: one transport connection and one channel on
/// it. The transport numbers its connections (a new number for each, never
/// reused while the key lives: a uhid device opened again, a new USB/IP
/// import); the channel is the CTAPHID CID, which a new connection may hand
/// out again.
public struct RequestOrigin: Hashable, Sendable {
    /// The transport connection.
    public var connection: UInt64
    /// The CTAPHID channel on it.
    public var channel: UInt32

    /// The origin `channel` on `connection`.
    public init(connection: UInt64, channel: UInt32) {
        self.connection = connection
        self.channel = channel
    }

    /// A caller with one conversation only (tests, fuzzers, benchmarks).
    public static let solitary = RequestOrigin(connection: 0, channel: 0)
}

/// What one conversation keeps between its requests.
struct Conversation: Sendable {
    /// The rest of a getAssertion's sequence.
    var assertions: PendingAssertions?
    /// The rest of a credentialManagement enumeration.
    var enumeration: CredentialManagementEnumeration?
    /// A large-blob array being written in fragments; in memory only, so a
    /// power cycle abandons it.
    var largeBlobWrite: PendingLargeBlobWrite?

    var isEmpty: Bool { assertions == nil && enumeration == nil && largeBlobWrite == nil }
}

/// The conversations in progress, by origin: the `capacity` most recently
/// used. A conversation pushed out by newer ones is over, as one whose
/// 30-second window ran out: its next "next" finds nothing. This bounds what
/// many channels can make the key hold.
struct ConversationTable: Sendable {
    let capacity: Int
    private var entries: [RequestOrigin: (conversation: Conversation, lastUse: UInt64)] = [:]
    private var uses: UInt64 = 0

    init(capacity: Int) {
        precondition(capacity > 0, "a key keeps at least one conversation")
        self.capacity = capacity
    }

    /// The conversation of `origin`; an empty one when it has none. Setting
    /// an empty conversation forgets the origin.
    subscript(origin: RequestOrigin) -> Conversation {
        get { entries[origin]?.conversation ?? Conversation() }
        set {
            guard !newValue.isEmpty else {
                entries[origin] = nil
                return
            }
            uses += 1
            entries[origin] = (newValue, uses)
            if entries.count > capacity, let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
                entries[oldest.key] = nil
            }
        }
    }

    /// How many origins have a conversation in progress.
    var count: Int { entries.count }

    /// Every conversation ends (power cycle, reset).
    mutating func removeAll() { entries.removeAll() }

    /// The conversations of a transport connection that went away end.
    mutating func removeAll(connection: UInt64) {
        entries = entries.filter { $0.key.connection != connection }
    }

    /// Every large-blob write in progress ends (the control API replaced the array).
    mutating func removeLargeBlobWrites() {
        for (origin, entry) in entries {
            var conversation = entry.conversation
            conversation.largeBlobWrite = nil
            entries[origin] = conversation.isEmpty ? nil : (conversation, entry.lastUse)
        }
    }
}
