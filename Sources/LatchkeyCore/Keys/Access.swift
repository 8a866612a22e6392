// Who may do what with a key: the one place the daemon decides it. Every
// door (the control API, the USB/IP server, the uhid device's node through
// udev, latchkey-webdriver through the control API) names the caller the
// kernel vouches for (SO_PEERCRED, NETLINK_SOCK_DIAG) and the tier it asks
// for, and asks `AccessRules.check`. Nothing else grants or refuses access;
// a route handler or a transport only carries the answer out.
//
// The tiers, from least to most private:
//
//   see     the key's document (name, owner, transports, options), its PIN status   owner, root
//   manage  create, delete, reset, replug, feature configuration                     owner, root
//   attach  import the key over USB/IP (root attaches it for its owner)               owner, root
//   use     credentials, PIN, presence and policy, overrides, signals, events         owner
//   answer  approve or deny its presence prompts                                       owner
//   export  private keys leave the daemon (export, ?privateKey=true)                   owner, and the
//                                                                                      key is exportable
//                                                                                      or the request
//                                                                                      carries its PIN
//
// Root administers keys but an owner's secrets and consent stay the owner's.
// Any account may create keys of its own; only root creates one for another
// (`checkCreate`). The rule names a refusal carries (`AccessRefusal.rule`):
// owner-or-root, owner-only, root-names-owner, and for export not-exportable,
// export-needs-pin, export-pin-refused (docs/access.md).

import Glibc
import LatchkeySystem

/// A local process asking something of the daemon, as the kernel identifies it.
public struct Caller: Sendable, Hashable, CustomStringConvertible {
    /// Its user id.
    public var uid: UInt32
    /// Its group id, when the kernel told it.
    public var gid: UInt32?
    /// Its process id, when the kernel told it (and the daemon could see it).
    public var pid: Int32?

    public init(uid: UInt32, gid: UInt32? = nil, pid: Int32? = nil) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
    }

    /// The daemon's own process.
    public static var daemon: Caller { Caller(uid: getuid(), gid: getgid(), pid: getpid()) }

    /// A caller no door could identify: uid (uid_t)-1, which no process runs as
    /// (setresuid(2) reads it as "unchanged") and no key may be owned by, so it
    /// holds no tier on any key.
    public static let unidentified = Caller(uid: .max)

    /// Root administers every key (create, delete, reset, attach) but holds no owner's secrets.
    public var isRoot: Bool { uid == 0 }

    /// "uid 1001 (bob)"
    public var description: String { AccountNames.describe(uid: uid) }
}

/// A tier of access to one key (see the top of this file).
public enum KeyAccess: String, Sendable, CaseIterable, Codable {
    case see, manage, attach, use, answer, export

    /// Whether root holds this tier on keys it does not own.
    var rootHolds: Bool {
        switch self {
        case .see, .manage, .attach: true
        case .use, .answer, .export: false
        }
    }

    /// Who holds the tier, for error messages and the route table.
    public var holders: String {
        rootHolds ? "the key's owner and root" : "the key's owner alone"
    }
}

/// A refusal: who asked for what on which key, and the rule that refused.
public struct AccessRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public var access: KeyAccess
    public var caller: Caller
    public var key: String
    public var owner: UInt32
    /// The rule's name, stable for scripts: "owner-only", "owner-or-root", "not-exportable", …
    public var rule: String
    public var reason: String

    public var description: String { reason }
}

/// The access rules.
public enum AccessRules {
    /// Refuses `caller` the tier `access` on `key`, owned by `owner`, or returns.
    public static func check(_ access: KeyAccess, caller: Caller, key: String, owner: UInt32) throws(AccessRefusal) {
        if caller.uid == owner { return }
        if caller.isRoot && access.rootHolds { return }
        let rule = access.rootHolds ? "owner-or-root" : "owner-only"
        throw AccessRefusal(
            access: access,
            caller: caller,
            key: key,
            owner: owner,
            rule: rule,
            reason: "key \(key) belongs to \(AccountNames.describe(uid: owner)); "
                + "\(caller) may not \(access.verb) it: \(access.rawValue) is for \(access.holders) (rule \(rule))"
        )
    }

    /// Whether `caller` holds `access` on a key owned by `owner` (listings filter with this).
    public static func allows(_ access: KeyAccess, caller: Caller, owner: UInt32) -> Bool {
        caller.uid == owner || (caller.isRoot && access.rootHolds)
    }

    /// Refuses `caller` making the key `key` for `owner`, or returns: every
    /// account may make keys of its own; only root makes them for another.
    public static func checkCreate(caller: Caller, key: String, owner: UInt32) throws(AccessRefusal) {
        if caller.uid == owner || caller.isRoot { return }
        let rule = "root-names-owner"
        throw AccessRefusal(
            access: .manage,
            caller: caller,
            key: key,
            owner: owner,
            rule: rule,
            reason: "\(caller) may not create key \(key) for \(AccountNames.describe(uid: owner)): "
                + "a key is made for its creator; only root names another owner (rule \(rule))"
        )
    }

    /// The export tier's second condition, for a caller `check(.export, …)` let
    /// through: the key is exportable, or the request carried the key's PIN and
    /// the key's engine accepted it. Ask it only after `check`, so that no other
    /// account can spend the key's PIN retries. Returns what granted the export.
    public static func checkExport(
        caller: Caller,
        key: String,
        owner: UInt32,
        exportable: Bool,
        evidence: ExportEvidence
    ) throws(AccessRefusal) -> ExportGrant {
        if exportable { return .exportable }
        let rule: String
        let reason: String
        switch evidence {
        case .pinVerified:
            return .pin
        case .pinRefused(let answer):
            rule = "export-pin-refused"
            reason = "key \(key) is not exportable and refused the PIN given: \(answer) (rule \(rule))"
        case .noPIN(keyHasPIN: true):
            rule = "export-needs-pin"
            reason =
                "key \(key) is not exportable: its private keys leave only with its PIN "
                + "(POST /v1/keys/\(key)/export with \"pin\", or latchkeyctl export --pin) (rule \(rule))"
        case .noPIN(keyHasPIN: false):
            rule = "not-exportable"
            reason =
                "key \(key) is not exportable and has no PIN: make a key exportable when it is created "
                + "(\"exportable\": true in POST /v1/keys, exportable = true in its [[keys]] table), "
                + "or set its PIN (latchkeyctl pin set) and export with it (rule \(rule))"
        }
        throw AccessRefusal(access: .export, caller: caller, key: key, owner: owner, rule: rule, reason: reason)
    }
}

/// What a request brings to the export tier besides its caller.
public enum ExportEvidence: Sendable, Equatable {
    /// No PIN; `keyHasPIN` says whether one could have been given.
    case noPIN(keyHasPIN: Bool)
    /// The key's PIN, which the key's engine verified (resetting its retries).
    case pinVerified
    /// A PIN the key's engine refused (wrong, blocked, or none is set): its answer.
    case pinRefused(String)
}

/// What let private keys leave: the key's `exportable` switch, or its PIN.
public enum ExportGrant: String, Sendable {
    case exportable, pin
}

extension KeyAccess {
    /// The verb in a refusal's message.
    var verb: String {
        switch self {
        case .see: "see"
        case .manage: "manage"
        case .attach: "attach"
        case .use: "use"
        case .answer: "answer the prompts of"
        case .export: "export"
        }
    }
}

/// User names for messages: "uid 1001 (bob)", or "uid 1001" when the account has no name.
public enum AccountNames {
    public static func describe(uid: UInt32) -> String { Accounts.describe(uid: uid) }

    /// The account's name from the password database, nil when there is none.
    public static func name(of uid: UInt32) -> String? { Accounts.name(of: uid) }

    /// The uid of the account named `name`, or `name` read as a number.
    public static func uid(of name: String) -> UInt32? { UInt32(name) ?? Accounts.uid(of: name) }
}
