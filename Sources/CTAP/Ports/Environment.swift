// What the authenticator gets from its surroundings (docs/ARCHITECTURE.md: the
// environment is injected): randomness, a monotonic clock and user presence. Each comes
// with an implementation for tests and fuzzers that is fully deterministic.

import LatchkeyCrypto
import Synchronization

/// A source of random bytes.
public protocol EntropySource: Sendable {
    /// `count` random bytes.
    func bytes(count: Int) -> [UInt8]
}

/// Random bytes from OpenSSL's CSPRNG (RAND_bytes): what a real key uses.
public struct SystemEntropy: EntropySource {
    public init() {}
    public func bytes(count: Int) -> [UInt8] { SecureRandom.bytes(count: count) }
}

/// A deterministic byte stream (HMAC-SHA-256 in counter mode over a seed) for
/// tests, fuzzers and benchmarks. Never use it for a real key.
public final class DeterministicEntropy: EntropySource {
    private let seed: [UInt8]
    private let counter = Mutex<UInt64>(0)

    /// A stream determined by `seed`.
    public init(seed: [UInt8]) { self.seed = seed }

    public func bytes(count: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count + 32)
        while out.count < count {
            let block = counter.withLock { value -> UInt64 in
                value &+= 1
                return value
            }
            let message = (0..<8).map { UInt8(truncatingIfNeeded: block >> (8 * UInt64($0))) }
            out.append(contentsOf: HMACSHA256.authenticationCode(key: seed, message: message))
        }
        return Array(out.prefix(count))
    }
}

/// Monotonic time in milliseconds since an arbitrary start (the daemon's start,
/// in practice). Only differences matter.
public protocol MonotonicClock: Sendable {
    /// The current time in milliseconds.
    var milliseconds: UInt64 { get }
}

/// A clock that moves only when told to, for tests.
public final class ManualClock: MonotonicClock {
    private let now: Mutex<UInt64>

    /// A clock reading `start`.
    public init(start: UInt64 = 0) { now = Mutex(start) }

    public var milliseconds: UInt64 { now.withLock { $0 } }

    /// Moves the clock forward.
    public func advance(by milliseconds: UInt64) {
        now.withLock { $0 &+= milliseconds }
    }
}

/// Why the authenticator wants a user's presence: what a consent prompt shows.
public struct PresenceRequest: Sendable, Equatable {
    /// The operation waiting on the user.
    public enum Operation: String, Sendable, Equatable {
        /// authenticatorMakeCredential.
        case makeCredential
        /// authenticatorGetAssertion.
        case getAssertion
        /// makeCredential hit the excludeList: the touch precedes CTAP2_ERR_CREDENTIAL_EXCLUDED.
        case excludedCredential
        /// An empty pinUvAuthParam: a client asking for a touch to pick this key.
        case touchProbe
        /// authenticatorReset.
        case reset
        /// clientPIN getPinUvAuthTokenUsingUvWithPermissions: built-in user
        /// verification for a pinUvAuthToken.
        case userVerificationToken
        /// authenticatorSelection.
        case selection
        /// U2F REGISTER.
        case u2fRegister
        /// U2F AUTHENTICATE with enforce-user-presence.
        case u2fAuthenticate
    }

    /// The operation.
    public var operation: Operation
    /// The relying party ID, when the operation has one. U2F gives only a
    /// hash (`rpIdHash`): its operations carry the RP ID of a credential
    /// stored on this key for that hash, when there is one, else nil.
    public var rpId: String?
    /// U2F's application parameter (SHA-256 of the RP ID or AppID) for U2F
    /// operations, so that a prompt can show it when no stored credential
    /// names the site; nil for CTAP2 operations, which give `rpId`.
    public var rpIdHash: [UInt8]?
    /// The user name the relying party gave, when it gave one.
    public var userName: String?
    /// makeCredential's user.id.
    public var userId: [UInt8]?
    /// makeCredential's user.displayName.
    public var userDisplayName: String?
    /// makeCredential asked for a discoverable credential (rk).
    public var discoverable: Bool
    /// The platform asked for built-in user verification with this touch
    /// (`uv: true`, or a pinUvAuthToken through UV): `.verified` grants both,
    /// `.approved` presence alone.
    public var userVerification: Bool

    /// Makes a request.
    public init(
        operation: Operation,
        rpId: String? = nil,
        rpIdHash: [UInt8]? = nil,
        userName: String? = nil,
        userId: [UInt8]? = nil,
        userDisplayName: String? = nil,
        discoverable: Bool = false,
        userVerification: Bool = false
    ) {
        self.operation = operation
        self.rpId = rpId
        self.rpIdHash = rpIdHash
        self.userName = userName
        self.userId = userId
        self.userDisplayName = userDisplayName
        self.discoverable = discoverable
        self.userVerification = userVerification
    }
}

/// How a presence request ended.
public enum PresenceOutcome: Sendable, Equatable {
    /// The user (or the policy) approved: presence, without user verification.
    case approved
    /// The user (or the policy) approved and the key's built-in user
    /// verification succeeded. Counts as `.approved` where no verification
    /// was asked for.
    case verified
    /// The user (or the policy) refused: CTAP2_ERR_OPERATION_DENIED.
    case denied
    /// Nobody answered in time: CTAP2_ERR_USER_ACTION_TIMEOUT.
    case timedOut
    /// The host withdrew the request (CTAPHID_CANCEL): CTAP2_ERR_KEEPALIVE_CANCEL.
    case cancelled
}

extension PresenceOutcome {
    /// Whether the user (or policy) said yes, verified or not.
    public var isApproval: Bool { self == .approved || self == .verified }
}

/// Decides user presence. The daemon's policy engine implements it; the
/// transport sends KEEPALIVE (UPNEEDED) while a call is outstanding and
/// cancels it on CTAPHID_CANCEL.
public protocol UserPresence: Sendable {
    /// Waits for the user's answer to `request`.
    func requestPresence(_ request: PresenceRequest) async -> PresenceOutcome
}

/// Presence that always answers the same, for tests, fuzzers and benchmarks.
public struct FixedPresence: UserPresence {
    /// The answer given to every request.
    public var outcome: PresenceOutcome

    /// Answers every request with `outcome`.
    public init(_ outcome: PresenceOutcome) { self.outcome = outcome }

    public func requestPresence(_ request: PresenceRequest) async -> PresenceOutcome { outcome }
}
