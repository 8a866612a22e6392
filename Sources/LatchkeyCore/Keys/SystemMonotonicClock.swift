// The daemon's one clock for the engine and the sessions: monotonic milliseconds since
// the daemon started (Swift's ContinuousClock). The keys' engines and presence brokers
// read it as CTAP's `MonotonicClock`; the HID sessions time each report's arrival with
// it, so that CTAPHID's deadlines and the engine's windows count on the same clock.

import CTAP

/// Monotonic milliseconds since the daemon started (Swift's ContinuousClock),
/// shared by the HID state machines and the authenticators.
public struct SystemMonotonicClock: MonotonicClock {
    public init() {}

    public var milliseconds: UInt64 { Self.now() }

    /// The reading now.
    public static func now() -> UInt64 {
        // `origin` first: the first access initializes it, and a reading taken
        // before that would lie before the origin (a negative duration, which
        // UInt64 traps on once the initialization took over a millisecond).
        let start = origin
        let (seconds, attoseconds) = (ContinuousClock.now - start).components
        return UInt64(seconds) * 1000 + UInt64(attoseconds / 1_000_000_000_000_000)
    }

    /// A fixed origin so that readings start near zero when the daemon starts.
    static let origin = ContinuousClock.now
}
