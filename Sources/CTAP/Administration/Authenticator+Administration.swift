// The key's owner managing it in-process: the daemon's control API calls these
// for a person who has no other FIDO tool. They are not CTAP commands — the
// caller is trusted by the control socket's permissions, so there is no
// pinUvAuthToken, no touch and no reset window — but each one goes through
// the same internals as its CTAP counterpart (setPIN, changePIN,
// updateUserInformation, toggleAlwaysUv, setMinPINLength, authenticatorReset),
// so the PIN policy, the retries counter and the power-cycle block behave
// exactly as they do for clientPIN.
//
// Errors are local failures (`AdministrationError`), not wire statuses: the
// statuses the shared internals throw are mapped once, in
// `AdministrationError.init(_:retries:)`.

import CBOR
import LatchkeyCrypto

/// A key's PIN and user verification settings, as its owner sees them.
public struct PINStatus: Sendable, Equatable {
    /// Whether a PIN is set (getInfo's clientPin option).
    public var isSet: Bool
    /// pinRetries: PIN attempts left before the PIN blocks for good (the
    /// maximum, 8, while no PIN is set).
    public var retries: Int
    /// The maximum of `retries` (CTAP 2.1 §6.5.2.2: 8).
    public var maxRetries: Int
    /// powerCycleState: three consecutive wrong PINs block further attempts
    /// until the key is plugged in again (§6.5.5.7).
    public var powerCycleRequired: Bool
    /// The minimum PIN length in Unicode code points (getInfo 0x0D).
    public var minPINLength: Int
    /// Whether the PIN must be changed before it is used again (getInfo 0x0C).
    public var forcePINChange: Bool
    /// Whether every operation needs user verification (getInfo's alwaysUv).
    public var alwaysUv: Bool
    /// The RP IDs the minPinLength extension tells the minimum PIN length to.
    public var minPinLengthRPIDs: [String]

    /// No retries are left: only a reset makes the key usable with a PIN again.
    public var isBlocked: Bool { isSet && retries == 0 }
}

/// The large-blob store's use, as its owner sees it.
public struct LargeBlobStatus: Sendable, Equatable {
    /// The serialized large-blob array's size in bytes: 17 for the initial
    /// (empty) array, which is 0x80 and its 16-byte hash.
    public var serializedSize: Int
    /// The most the key keeps (getInfo maxSerializedLargeBlobArray).
    public var maxSerializedLargeBlobArray: Int
}

/// Why an administrative operation was refused; equal by code, so tests can
/// match it. `reason` is meant for the key's owner and never contains a PIN;
/// store and crypto detail went to the authenticator's diagnostics already.
public struct AdministrationError: Error, Equatable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// The operation needs a PIN and none is set.
        public static let pinNotSet = Code(name: "pinNotSet")
        /// A PIN is set already: it is changed, never set again.
        public static let pinAlreadySet = Code(name: "pinAlreadySet")
        /// The current PIN was wrong; it cost a retry (`retries` says how many are left).
        public static let pinInvalid = Code(name: "pinInvalid")
        /// No retries are left: only a reset clears it.
        public static let pinBlocked = Code(name: "pinBlocked")
        /// Three wrong PINs in a row: no more attempts until a power cycle.
        public static let pinAuthBlocked = Code(name: "pinAuthBlocked")
        /// The new PIN breaks the PIN policy (length, NUL, same as a PIN whose
        /// change is forced).
        public static let pinPolicyViolation = Code(name: "pinPolicyViolation")
        /// A setting the rules refuse (a minimum PIN length that decreases or
        /// exceeds 63).
        public static let settingRefused = Code(name: "settingRefused")
        /// No stored credential has the ID.
        public static let noCredential = Code(name: "noCredential")
        /// A value out of range (a user name over 64 bytes).
        public static let invalidParameter = Code(name: "invalidParameter")
        /// The credential (its ID, or its relying party and user) is on the
        /// key already.
        public static let duplicate = Code(name: "duplicate")
        /// The key holds as many credentials, or as large a large-blob array,
        /// as it can.
        public static let full = Code(name: "full")
        /// The store or the crypto failed (detail in the diagnostics).
        public static let storage = Code(name: "storage")
        public var description: String { name }
    }

    public var code: Code
    public var reason: String
    /// PIN retries left, with `.pinInvalid`.
    public var retries: Int?
    public var file: String
    public var line: Int

    public init(_ code: Code, _ reason: String, retries: Int? = nil, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.reason = reason
        self.retries = retries
        self.file = file
        self.line = line
    }

    /// The one mapping from the shared internals' statuses to administrative
    /// errors; callers refine the statuses whose meaning depends on the
    /// operation before they get here.
    init(_ status: CTAPStatus, retries: Int?, file: String = #fileID, line: Int = #line) {
        switch status {
        case .pinNotSet:
            self.init(.pinNotSet, "no PIN is set", file: file, line: line)
        case .pinInvalid:
            let left = retries.map { $0 == 1 ? "1 retry left" : "\($0) retries left" } ?? "retries unknown"
            self.init(.pinInvalid, "wrong PIN (\(left))", retries: retries, file: file, line: line)
        case .pinBlocked:
            self.init(
                .pinBlocked,
                "the PIN is blocked: no retries are left, and only a reset (which erases the key) "
                    + "makes it usable again",
                file: file,
                line: line
            )
        case .pinAuthBlocked:
            self.init(
                .pinAuthBlocked,
                "three wrong PINs in a row: PIN entry is blocked until the key is plugged in "
                    + "again (replug it, or restart the daemon)",
                file: file,
                line: line
            )
        case .noCredentials:
            self.init(.noCredential, "no stored credential has this ID", file: file, line: line)
        case .invalidParameter:
            self.init(.invalidParameter, "invalid parameter", file: file, line: line)
        case .keyStoreFull:
            self.init(.full, "the key holds as many discoverable credentials as it can", file: file, line: line)
        case .largeBlobStorageFull:
            self.init(.full, "the large-blob array would exceed the key's limit", file: file, line: line)
        case .integrityFailure:
            self.init(.invalidParameter, "the large-blob array's trailing hash does not match", file: file, line: line)
        case .credentialExcluded:
            self.init(
                .duplicate, "the key already holds this credential ID, or one for this relying party and user",
                file: file, line: line
            )
        default:
            self.init(.storage, "the key's store failed (the daemon's log says why)", file: file, line: line)
        }
    }

    public static func == (lhs: AdministrationError, rhs: AdministrationError) -> Bool { lhs.code == rhs.code }

    public var description: String { "\(code): \(reason) (\(file):\(line))" }
}

extension Authenticator {
    // MARK: - PIN

    /// The PIN's state and the settings that go with it.
    public func pinStatus() throws(AdministrationError) -> PINStatus {
        try administering { () throws(CTAPStatus) in
            PINStatus(
                isSet: try storedPIN() != nil,
                retries: try pinRetries(),
                maxRetries: PINSecret.maxRetries,
                powerCycleRequired: pinUvAuth.consecutiveMismatches >= PINSecret.maxConsecutiveMismatches,
                minPINLength: try minPINLength(),
                forcePINChange: try forcePINChange(),
                alwaysUv: try alwaysUv(),
                minPinLengthRPIDs: try minPinLengthRPIDs()
            )
        }
    }

    /// Sets the first PIN, under the policy clientPIN's setPIN applies
    /// (§6.5.5.5): at least the minimum length in code points, at most 63
    /// bytes of UTF-8. `pin` should be in NFC, as a platform sends it
    /// (§6.5.1); the caller normalizes, this target has no Unicode tables.
    public func setPIN(_ pin: String) throws(AdministrationError) {
        // A set PIN is changed, never set again (setPIN's step 3).
        guard try administering({ () throws(CTAPStatus) in try storedPIN() }) == nil else {
            throw AdministrationError(.pinAlreadySet, "a PIN is set already; change it instead")
        }
        let newPin = try checkedPIN(pin)
        try administering { () throws(CTAPStatus) in try storeFirstPIN(newPin) }
    }

    /// Changes the PIN as clientPIN's changePIN does (§6.5.5.6): a wrong
    /// `current` costs a retry and counts towards the power-cycle block, a
    /// blocked PIN is refused, the new PIN meets the policy, and a forced
    /// change is done (outstanding pinUvAuthTokens stop working).
    public func changePIN(from current: String, to new: String) throws(AdministrationError) {
        let stored = try unblockedPIN()
        // The policy is public, so checking it first reveals nothing and
        // spares a retry for a new PIN that could never be accepted. That the
        // new PIN differs from a PIN whose change is forced is checked only
        // after the current PIN matched (in replacePIN): before, it would
        // tell whether a guess is the current PIN without spending a retry.
        let newPin = try checkedPIN(new)
        let presented = Self.pinHash(current)
        try administering(
            { () throws(CTAPStatus) in
                try checkPIN(presented, against: stored, regenerating: nil)
                try replacePIN(stored, with: newPin)
            },
            refining: { status in
                status == .pinPolicyViolation
                    ? AdministrationError(.pinPolicyViolation, "the PIN must be changed to a different PIN") : nil
            }
        )
    }

    /// Checks `pin` against the key's PIN for an operation of the daemon that
    /// needs its owner's PIN (an export), as changePIN checks the current PIN
    /// (§6.5.5.6 steps 6–8): a wrong PIN costs a retry and counts towards the
    /// power-cycle block, a right one restores the retries, a blocked PIN is
    /// refused. `pin` should be in NFC, as for `changePIN`.
    public func verifyPIN(_ pin: String) throws(AdministrationError) {
        let stored = try unblockedPIN()
        let presented = Self.pinHash(pin)
        try administering { () throws(CTAPStatus) in try checkPIN(presented, against: stored, regenerating: nil) }
    }

    /// The stored PIN, when one is set and not blocked.
    private func unblockedPIN() throws(AdministrationError) -> StoredPIN {
        try administering { () throws(CTAPStatus) in
            guard let stored = try storedPIN() else { throw .pinNotSet }
            if try pinRetries() == 0 { throw .pinBlocked }
            return stored
        }
    }

    /// LEFT(SHA-256(pin), 16), the form clientPIN compares (§6.5.5.6 step 7).
    private static func pinHash(_ pin: String) -> [UInt8] {
        Array(SHA256.hash(Array(pin.utf8)).prefix(16))
    }

    /// `pin` as a new PIN: no NUL (a platform's padded PIN cannot end in
    /// one, and one within is a PIN no keyboard types), then checkedNewPin's
    /// policy.
    private func checkedPIN(_ pin: String) throws(AdministrationError) -> StoredPIN {
        guard !pin.utf8.contains(0) else {
            throw AdministrationError(.pinPolicyViolation, "a PIN cannot contain NUL characters")
        }
        return try administering(
            { () throws(CTAPStatus) in try checkedNewPin(Array(pin.utf8)) },
            refining: { status in
                guard status == .pinPolicyViolation, let minimum = try? minPINLength() else { return nil }
                return AdministrationError(
                    .pinPolicyViolation,
                    "a PIN has at least \(minimum) characters (Unicode code points) and "
                        + "at most \(PINSecret.maxByteCount) bytes of UTF-8"
                )
            }
        )
    }

    // MARK: - Credentials

    /// Replaces a stored credential's user name and display name, as
    /// updateUserInformation does (§6.8.6). A nil field keeps its value, an
    /// empty one is removed; each is at most 64 bytes of UTF-8 (the length
    /// an authenticator may truncate them to, WebAuthn §6.4.1), so that an
    /// assertion carrying them still fits a CTAPHID message. Returns the
    /// credential as stored.
    public func updateUser(credentialId: [UInt8], name: String?, displayName: String?) throws(AdministrationError)
        -> StoredCredential
    {
        for (field, value) in [("name", name), ("displayName", displayName)] {
            if let value, value.utf8.count > 64 {
                throw AdministrationError(.invalidParameter, "the user \(field) is over 64 bytes of UTF-8")
            }
        }
        return try administering { () throws(CTAPStatus) in
            let found = try storing("looking up a credential") { () throws(StoreError) in
                try store.credential(id: credentialId)
            }
            guard let credential = found else { throw .noCredentials }
            let user = UserEntity(
                id: credential.userId,
                name: name ?? credential.userName,
                displayName: displayName ?? credential.userDisplayName
            )
            return try updateUser(of: credential, to: user)
        }
    }

    // MARK: - Configuration

    /// Turns alwaysUv on or off (what toggleAlwaysUv toggles, §6.11.3).
    public func setAlwaysUv(_ enabled: Bool) throws(AdministrationError) {
        try administering { () throws(CTAPStatus) in
            if try alwaysUv() != enabled { try toggleAlwaysUv() }
        }
    }

    /// setMinPINLength (§6.11.4): `length` nil keeps the minimum; it never
    /// decreases and is at most 63. `forceChange` (or a current PIN shorter
    /// than the new minimum) makes the PIN's owner change it before its next
    /// use; forcing needs a PIN. `rpIds`, when given, replace the RP IDs the
    /// minPinLength extension tells the minimum to (at most
    /// maxRPIDsForSetMinPINLength).
    public func setMinPINLength(_ length: Int?, forceChange: Bool, rpIds: [String]? = nil)
        throws(AdministrationError)
    {
        let current = try administering { () throws(CTAPStatus) in try minPINLength() }
        let refused = AdministrationError(
            .settingRefused,
            "the minimum PIN length is \(current) and never decreases (only a reset restores "
                + "the default); it is at most \(PINSecret.maxByteCount)"
        )
        if let length, length < 0 { throw refused }
        // Said here because the engine's answer, KEY_STORE_FULL, would read
        // as a full disk.
        if let rpIds, rpIds.count > configuration.maxRPIDsForSetMinPINLength {
            throw AdministrationError(
                .settingRefused,
                "at most \(configuration.maxRPIDsForSetMinPINLength) RP IDs may read the minimum PIN length"
            )
        }
        // The subcommand's own parameters, so that every rule of
        // setMinPINLength applies here unchanged.
        var params: [(Int, CBORValue)] = []
        if let length { params.append((0x01, .int(length))) }
        if let rpIds { params.append((0x02, .array(rpIds.map { .text($0) }))) }
        if forceChange { params.append((0x03, .boolean(true))) }
        let subCommand = Int(AuthenticatorConfigSubcommand.setMinPINLength.rawValue)
        try administering(
            { () throws(CTAPStatus) in
                let request = try reading { () throws(CBORError) in
                    try AuthenticatorConfigRequest(cbor: .intMap([(0x01, .int(subCommand)), (0x02, .intMap(params))]))
                }
                try setMinPINLength(request)
            },
            refining: { status in
                switch status {
                case .pinPolicyViolation: refused
                case .pinNotSet: AdministrationError(.pinNotSet, "no PIN is set, so no change of it can be forced")
                default: nil
                }
            }
        )
    }

    // MARK: - Reset

    /// authenticatorReset's effect (§6.6) without its power-up window and
    /// touch, which the control socket's permissions stand in for: every
    /// credential, the PIN and its retries, the minimum PIN length, alwaysUv,
    /// the large-blob array and every other secret go, the identity (AAGUID,
    /// attestation key, `device.` secrets) stays; a new wrapping secret
    /// means credential IDs issued before no longer unwrap. Then a power
    /// cycle, so that whatever session state the engine keeps goes too (key
    /// agreement keys, pinUvAuthTokens, the power-cycle block, pending
    /// getNextAssertion, enumerations, large-blob writes); it also opens the
    /// reset window, harmless on a key just reset.
    public func administrativeReset() throws(AdministrationError) {
        try administering { () throws(CTAPStatus) in try erase() }
        powerCycle()
    }

    // MARK: - Large blobs

    /// How much of the large-blob store is used.
    public func largeBlobStatus() throws(AdministrationError) -> LargeBlobStatus {
        let (serializedSize, limit) = try administering { () throws(CTAPStatus) in try largeBlobArrayStatus() }
        return LargeBlobStatus(serializedSize: serializedSize, maxSerializedLargeBlobArray: limit)
    }

    // MARK: - Mapping

    /// Runs CTAP internals; a status they throw becomes an
    /// `AdministrationError`: the operation's own reading of it from
    /// `refining`, else the general one (with the retries left after a
    /// wrong PIN).
    func administering<T>(
        _ body: () throws(CTAPStatus) -> T,
        refining: (CTAPStatus) -> AdministrationError? = { _ in nil }
    ) throws(AdministrationError) -> T {
        do {
            return try body()
        } catch {
            if let refined = refining(error) { throw refined }
            throw AdministrationError(error, retries: error == .pinInvalid ? try? pinRetries() : nil)
        }
    }
}
