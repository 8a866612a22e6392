// The key manager carrying out the access rules (Keys/Access.swift) for the
// control API: each entry point refuses another account with a 403 naming the
// rule, publishes one access.refused event on the key's stream, and changes
// nothing; listings and event streams show only what the caller holds a tier
// on; owners come from the creator, root, key.json and the configuration;
// export needs the owner and an exportable key or the key's PIN.

import Foundation
import LatchkeyContract
import Logging
import Testing

@testable import LatchkeyCore
@testable import LatchkeyDaemon

/// A key manager over a fresh state directory, with no transports.
private struct Keys {
    static let owner = Caller(uid: 1001, gid: 1001, pid: 11)
    static let other = Caller(uid: 1002, gid: 1001, pid: 12)
    static let root = Caller(uid: 0, gid: 0, pid: 1)

    let path: String
    let events = EventBus()
    let manager: KeyManager

    init(keys: [KeyConfiguration] = []) throws {
        path = FileManager.default.temporaryDirectory.path + "/latchkey-access-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path + "/keys", withIntermediateDirectories: true)
        manager = Self.manager(path, keys: keys, events: events)
    }

    static func manager(_ path: String, keys: [KeyConfiguration] = [], events: EventBus = EventBus()) -> KeyManager {
        var configuration = DaemonConfiguration(stateDirectory: path, controlSocket: "/unused")
        configuration.keys = keys
        return KeyManager(
            configuration: configuration,
            masterKey: Array(repeating: 1, count: 32),
            board: PresenceBoard(),
            transports: NoTransports(),
            events: events,
            logger: Logger(label: "test")
        )
    }

    /// Makes the key `name` for the owner.
    @discardableResult
    func make(_ name: String, exportable: Bool? = nil) async throws -> KeyDocument {
        var request = CreateKeyRequest(name: name)
        request.exportable = exportable
        return try await manager.create(request, by: Self.owner)
    }

    /// `caller`'s grant of `access` on the key `name`.
    func grant(_ name: KeyName, _ access: KeyAccess, _ caller: Caller = Keys.owner) async throws -> KeyGrant {
        try await manager.grant(name, access, by: caller)
    }

    func cleanUp() { try? FileManager.default.removeItem(atPath: path) }
}

extension EventSubscription {
    /// The events received until now (the bus is closed first).
    func drained(closing bus: EventBus) async -> [DaemonEvent] {
        bus.close()
        var events: [DaemonEvent] = []
        for await event in self { events.append(event) }
        return events
    }
}

/// The error an operation throws, as the control API answers it (nil when it succeeds).
private func refusal(_ operation: () async throws -> Void) async -> ControlError? {
    do {
        try await operation()
        return nil
    } catch let error as CoreError {
        return ControlError(error)
    } catch {
        Issue.record("not a CoreError: \(error)")
        return nil
    }
}

@Suite("key access through the key manager")
struct KeyAccessTests {
    /// One entry point of each tier, called with `caller`'s grant of that tier on key "k".
    static let operations: [(KeyAccess, String, @Sendable (KeyManager, KeyGrant) async throws -> Void)] = [
        (.see, "document", { _ = try await $0.document($1) }),
        (.see, "pinStatus", { _ = try await $0.pinStatus($1) }),
        (.see, "presenceSettings", { _ = try await $0.presenceSettings($1) }),
        (.manage, "replug", { _ = try await $0.replug($1) }),
        (.manage, "updateConfiguration", { _ = try await $0.updateConfiguration($1, ConfigDocument()) }),
        (.use, "credentials", { _ = try await $0.credentials($1) }),
        (.use, "updatePresence", { _ = try await $0.updatePresence($1, PresenceDocument(mode: .deny)) }),
        (.use, "policy", { _ = try await $0.policy($1) }),
        (.use, "clearOverrides", { try await $0.clearOverrides($1) }),
        (.use, "updatePIN", { _ = try await $0.updatePIN($1, PINRequest(newPin: "123456")) }),
        (.export, "exportCXF", { _ = try await $0.exportCXF($1, ExportRequest(plaintext: true)) }),
    ]

    /// Operation `index` of `operations`, tried by `caller` on a fresh key "k" of the
    /// owner; `check` gets its tier, name, refusal, the keys and the events it published.
    private func attempt(
        _ index: Int,
        by caller: Caller,
        exportable: Bool? = nil,
        _ check: (KeyAccess, String, ControlError?, Keys, [DaemonEvent]) async throws -> Void
    ) async throws {
        let (access, name, operation) = Self.operations[index]
        let keys = try Keys()
        defer { keys.cleanUp() }
        try await keys.make("k", exportable: exportable)
        let stream = keys.events.subscribe()
        let error = await refusal { try await operation(keys.manager, keys.manager.grant("k", access, by: caller)) }
        try await check(access, name, error, keys, await stream.drained(closing: keys.events))
    }

    @Test(
        "another account is refused every tier: 403 forbidden naming the rule, one access.refused event, nothing changed",
        arguments: operations.indices
    )
    func otherRefused(_ index: Int) async throws {
        try await attempt(index, by: Keys.other) { access, name, error, keys, events in
            #expect(error?.status == 403, "\(name)")
            #expect(error?.code == "forbidden")
            #expect(error?.rule == (access.rootHolds ? "owner-or-root" : "owner-only"))
            #expect(error?.message.contains("uid 1002") == true && error?.message.contains("uid 1001") == true)
            #expect(events.map(\.name) == [.accessRefused], "\(name): \(events.map(\.name))")
            #expect(events.first?.key == "k")
            #expect(
                events.first?.fields
                    == [
                        "access": .string(access.rawValue), "rule": .string(error?.rule ?? ""), "uid": 1002,
                        "door": "control",
                    ]
            )
            let mode = try await keys.manager.presenceSettings(keys.grant("k", .see)).mode
            #expect(mode == .prompt, "nothing changed")
        }
    }

    @Test(
        "root sees and manages another's key but may not use it, answer it or export it",
        arguments: operations.indices
    )
    func root(_ index: Int) async throws {
        try await attempt(index, by: Keys.root, exportable: true) { access, name, error, _, _ in
            if access.rootHolds {
                #expect(error == nil, "\(name): \(String(describing: error))")
            } else {
                #expect(error?.status == 403 && error?.rule == "owner-only", "\(name)")
            }
        }
    }

    @Test("the owner holds every tier", arguments: operations.indices)
    func owner(_ index: Int) async throws {
        try await attempt(index, by: Keys.owner, exportable: true) { _, name, error, _, _ in
            #expect(error == nil, "\(name): \(String(describing: error))")
        }
    }

    @Test("an entry point given a grant of another tier asks the rules again: root's see is no use")
    func otherTier() async throws {
        let keys = try Keys()
        defer { keys.cleanUp() }
        try await keys.make("k")
        let see = try await keys.grant("k", .see, Keys.root)
        let stream = keys.events.subscribe()
        let error = await refusal { _ = try await keys.manager.credentials(see) }
        #expect(error?.status == 403 && error?.rule == "owner-only")
        #expect(await stream.drained(closing: keys.events).map(\.name) == [.accessRefused])
        let owners = try await keys.grant("k", .see)
        #expect(try await keys.manager.credentials(owners).isEmpty, "the owner's see grant leads to use")
    }

    @Test("a key that does not exist is a 404 for everyone, with no event")
    func missing() async throws {
        let keys = try Keys()
        defer { keys.cleanUp() }
        let stream = keys.events.subscribe()
        #expect(await refusal { _ = try await keys.manager.grant("nope", .see, by: Keys.other) }?.status == 404)
        #expect(await stream.drained(closing: keys.events).isEmpty)
    }

    @Test("listings show another's keys to no one but root; the key document names the owner")
    func listings() async throws {
        let keys = try Keys()
        defer { keys.cleanUp() }
        try await keys.make("mine")
        _ = try await keys.manager.create(CreateKeyRequest(name: "theirs"), by: Keys.other)
        #expect(await keys.manager.documents(by: Keys.owner).map(\.name) == ["mine"])
        #expect(await keys.manager.documents(by: Keys.other).map(\.name) == ["theirs"])
        #expect(await keys.manager.documents(by: Keys.root).map(\.name) == ["mine", "theirs"])
        let document = try await keys.manager.document(keys.grant("mine", .see))
        #expect(document.owner.uid == 1001 && document.exportable == false)
    }

    @Test("an event stream carries only the events of keys its subscriber may use; ?key of another's is refused")
    func eventStreams() async throws {
        let keys = try Keys()
        defer { keys.cleanUp() }
        try await keys.make("mine")
        let owners = try await keys.manager.subscribe(key: nil, by: Keys.owner)
        let others = try await keys.manager.subscribe(key: nil, by: Keys.other)
        let roots = try await keys.manager.subscribe(key: nil, by: Keys.root)
        let later = try await keys.manager.subscribe(key: "later", by: Keys.other)
        _ = try await keys.manager.replug(keys.grant("mine", .manage))
        _ = try await keys.manager.create(CreateKeyRequest(name: "later"), by: Keys.other)
        keys.events.publish(.policyDecision, key: nil, ["reason": "daemon-wide"])
        let error = await refusal { _ = try await keys.manager.subscribe(key: "mine", by: Keys.other) }
        #expect(error?.status == 403 && error?.rule == "owner-only")
        keys.events.close()
        var seen: [String: [String]] = [:]
        for (who, stream) in [("owner", owners), ("other", others), ("root", roots), ("later", later)] {
            for await event in stream { seen[who, default: []].append("\(event.name)/\(event.key ?? "-")") }
        }
        #expect(seen["owner"] == ["key.replugged/mine", "policy.decision/-", "access.refused/mine"])
        #expect(seen["other"] == ["key.created/later", "policy.decision/-"])
        #expect(seen["root"] == ["policy.decision/-"], "root holds no use on another's key")
        #expect(seen["later"] == ["key.created/later", "policy.decision/-"], "a key made after subscribing")
    }

    @Test("only root makes a key for another account; key.json keeps the owner's uid for a restart")
    func owners() async throws {
        let keys = try Keys()
        defer { keys.cleanUp() }
        var request = CreateKeyRequest(name: "for-other")
        request.owner = .uid(1002)
        let refused = await refusal { _ = try await keys.manager.create(request, by: Keys.owner) }
        #expect(refused?.status == 403 && refused?.rule == "root-names-owner")
        #expect(!FileManager.default.fileExists(atPath: keys.path + "/keys/for-other"), "nothing made")
        #expect(try await keys.manager.create(request, by: Keys.root).owner.uid == 1002)
        request.owner = .name("no-such-account-here")
        #expect(await refusal { _ = try await keys.manager.create(request, by: Keys.root) }?.status == 400)

        // What a restart reads back (the store stays locked by this manager, so read key.json).
        let data = try #require(FileManager.default.contents(atPath: keys.path + "/keys/for-other/key.json"))
        let stored = try JSONDecoder().decode(CreateKeyRequest.self, from: data)
        #expect(stored.owner == .uid(1002))
        #expect(KeyManager.keyConfiguration(stored, name: "for-other", defaultPresence: .prompt).owner == 1002)
        var old = stored
        old.owner = nil
        #expect(KeyManager.keyConfiguration(old, name: "old", defaultPresence: .prompt).owner == nil, "the daemon's")
    }

    @Test("a configured key belongs to its owner, or to the daemon's uid without one")
    func configuredOwners() async throws {
        var owned = KeyConfiguration(name: "owned")
        owned.owner = 1001
        let keys = try Keys(keys: [owned, KeyConfiguration(name: "daemons")])
        defer { keys.cleanUp() }
        try await keys.manager.startAll()
        #expect(try await keys.manager.document(keys.grant("owned", .see)).owner.uid == 1001)
        #expect(try await keys.manager.document(keys.grant("daemons", .see, .daemon)).owner.uid == getuid())
    }

    @Test("exportable is chosen at creation: PUT config naming it is a 400 and changes nothing")
    func exportableFixed() async throws {
        let keys = try Keys()
        defer { keys.cleanUp() }
        try await keys.make("k")
        var body = ConfigDocument()
        body.exportable = true
        #expect(
            await refusal { _ = try await keys.manager.updateConfiguration(keys.grant("k", .manage), body) }?.status == 400
        )
        #expect(try await keys.manager.document(keys.grant("k", .see)).exportable == false)
    }

    @Test(
        "export: no PIN set is not-exportable, a PIN set is export-needs-pin, a wrong PIN costs a retry, the right one exports"
    )
    func exportWithPIN() async throws {
        let keys = try Keys()
        defer { keys.cleanUp() }
        try await keys.make("k")
        let manager = keys.manager
        let stream = keys.events.subscribe(key: "k")
        let noPIN = await refusal { _ = try await manager.exportCXF(keys.grant("k", .export), ExportRequest(plaintext: true)) }
        #expect(noPIN?.rule == "not-exportable")
        #expect(noPIN?.message.contains("exportable") == true && noPIN?.message.contains("PIN") == true)
        _ = try await manager.updatePIN(keys.grant("k", .use), PINRequest(newPin: "123456"))
        #expect(
            await refusal { _ = try await manager.exportCXF(keys.grant("k", .export), ExportRequest(plaintext: true)) }?.rule
                == "export-needs-pin"
        )
        let wrong = await refusal { _ = try await manager.exportCXF(keys.grant("k", .export), ExportRequest(plaintext: true, pin: "000000")) }
        #expect(wrong?.rule == "export-pin-refused" && wrong?.message.contains("7 retries left") == true)
        #expect(try await manager.pinStatus(keys.grant("k", .see)).retries == 7)
        let root = await refusal { _ = try await manager.exportCXF(keys.grant("k", .export, Keys.root), ExportRequest(plaintext: true, pin: "000000")) }
        #expect(root?.rule == "owner-only")
        #expect(try await manager.pinStatus(keys.grant("k", .see)).retries == 7, "another caller spends no retry")
        let export = try await manager.exportCXF(keys.grant("k", .export), ExportRequest(plaintext: true, pin: "123456"))
        #expect(export.count == 0)
        #expect(try await manager.pinStatus(keys.grant("k", .see)).retries == 8)
        let events = await stream.drained(closing: keys.events)
        #expect(
            events.map(\.name) == [.accessRefused, .accessRefused, .accessRefused, .accessRefused, .keyExported]
        )
        #expect(events.last?.fields["grant"] == "pin" && events.last?.fields["uid"] == 1001)
    }

    @Test("an exportable key exports without its PIN; ?privateKey=true needs an exportable key")
    func exportable() async throws {
        let keys = try Keys()
        defer { keys.cleanUp() }
        try await keys.make("ci", exportable: true)
        try await keys.make("person")
        let export = try await keys.manager.exportCXF(keys.grant("ci", .export), ExportRequest(plaintext: true))
        #expect(try CXF.read(export.document).isEmpty, "a CXF document of no passkeys")
        let error = await refusal {
            _ = try await keys.manager.credential(keys.grant("person", .use), id: "AAAA", includePrivateKey: true)
        }
        #expect(error?.rule == "not-exportable")
        let missing = await refusal {
            _ = try await keys.manager.credential(keys.grant("ci", .use), id: "AAAA", includePrivateKey: true)
        }
        #expect(missing?.status == 404, "exportable: the credential lookup runs")
    }
}

@Suite("the route table")
struct RouteTableTests {
    /// The table of docs/access.md: "| GET | `/v1/keys` | listing: see |" rows.
    static func documented() throws -> [String: String] {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/access.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        var rows: [String: String] = [:]
        for line in text.split(separator: "\n")
        where line.hasPrefix("| GET") || line.hasPrefix("| P") || line.hasPrefix("| DELETE") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 3 else { continue }
            rows["\(cells[0]) \(cells[1].replacingOccurrences(of: "`", with: ""))"] = cells[2]
        }
        return rows
    }

    /// How docs/access.md writes a route's access.
    static func text(_ route: RouteDocument) -> String {
        if let filter = route.filter { return "\(route.access): \(filter.rawValue)" }
        if let privateKey = route.privateKey {
            return "\(route.access); \(privateKey.rawValue) with ?privateKey=true"
        }
        return route.access
    }

    @Test("docs/access.md's table is the server's: every route, with its access")
    func docsMatchServer() throws {
        let keys = try Keys()
        defer { keys.cleanUp() }
        let server = ControlServer(
            manager: keys.manager,
            board: PresenceBoard(),
            socketPath: "/unused",
            stateDirectory: keys.path,
            listening: Latch(),
            logger: Logger(label: "test")
        )
        let routes = server.makeRouter().table.routes.withLock { $0 }
        #expect(routes.count > 30)
        let served = Dictionary(uniqueKeysWithValues: routes.map { ("\($0.method) \($0.path)", Self.text($0)) })
        let documented = try Self.documented()
        for (route, access) in served.sorted(by: { $0.key < $1.key }) {
            #expect(documented[route]?.replacingOccurrences(of: "`", with: "") == access, "\(route)")
        }
        #expect(Set(documented.keys) == Set(served.keys))
    }
}

@Suite("key owners in the configuration")
struct OwnerConfigurationTests {
    static func parse(_ toml: String) throws(ConfigurationError) -> [KeyConfiguration] {
        var configuration = DaemonConfiguration(stateDirectory: "/unused", controlSocket: "/unused")
        try configuration.apply(toml: toml, source: "test.toml")
        return configuration.keys
    }

    @Test("owner is an account's name, a uid or a string of digits; exportable is off unless set")
    func parsed() throws {
        let keys = try Self.parse(
            """
            [[keys]]
            name = "a"
            owner = "root"
            exportable = true
            [[keys]]
            name = "b"
            owner = 1234
            [[keys]]
            name = "c"
            owner = "1235"
            [[keys]]
            name = "d"
            """
        )
        #expect(keys.map(\.owner) == [0, 1234, 1235, nil])
        #expect(keys.map(\.exportable) == [true, false, false, false])
    }

    @Test(
        "an owner that names no account is an error naming the table",
        arguments: ["owner = \"no-such-account-here\"", "owner = -1", "owner = 4294967295", "owner = true"]
    )
    func unknown(_ line: String) {
        #expect {
            _ = try Self.parse("[[keys]]\nname = \"a\"\n\(line)\n")
        } throws: { error in
            "\(error)".contains("test.toml [[keys]] #1: owner")
        }
    }
}
