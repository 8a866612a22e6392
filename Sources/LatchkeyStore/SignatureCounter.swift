// Signature counters that never repeat, even across kill -9: a process hands
// out values from a block whose end it has persisted first. On restart a
// scope resumes at the persisted end, above every value handed out before.

import CTAP

/// The in-memory state of one counter scope.
struct SignatureCounter: Sendable, Equatable {
    /// How many values one persisted reservation covers.
    static let block: UInt64 = 32
    /// One past the largest value a counter may return (UInt32.max).
    static let end: UInt64 = UInt64(UInt32.max) + 1

    /// The value the next call returns.
    private(set) var next: UInt64
    /// The persisted bound: every value handed out is below it.
    private(set) var reserved: UInt64

    /// The state at first use in this process, from the persisted bound
    /// (`nil`: the scope has never handed out a value).
    init(persisted: Int64?, scope: String) throws(StoreError) {
        guard let persisted else {
            self.next = 1
            self.reserved = 1
            return
        }
        guard persisted >= 1, UInt64(persisted) <= Self.end else {
            throw StoreError(.corrupt, "signature counter reservation \(persisted) of \(scope) is out of range")
        }
        self.next = UInt64(persisted)
        self.reserved = UInt64(persisted)
    }

    /// The bound to persist before `take()` may run, or `nil` when the next
    /// value is already covered. Throws when the counter is exhausted.
    func reservationNeeded(scope: String) throws(StoreError) -> UInt64? {
        guard next < Self.end else {
            throw StoreError(
                .io,
                "signature counter of \(scope) reached UInt32.max; it cannot count further without repeating"
            )
        }
        return next < reserved ? nil : min(next + Self.block, Self.end)
    }

    /// Records that `bound` has reached stable storage.
    mutating func reserved(upTo bound: UInt64) {
        precondition(bound > next && bound >= reserved, "a reservation only grows")
        reserved = bound
    }

    /// Hands out the next value; only after its reservation is persisted.
    mutating func take() -> UInt32 {
        precondition(next < reserved, "a counter value is handed out only under a persisted reservation")
        defer { next += 1 }
        return UInt32(next)
    }
}
