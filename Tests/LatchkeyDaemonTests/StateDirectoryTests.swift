// The state directory's containment check, on its own: paths no KeyName
// could produce, and directories a symbolic link turned into somewhere else.
// Then the key manager over it: a key whose directory was swapped for a link
// is not deleted through it, and bad names never reach the disk.

import Foundation
import Logging
import Testing

@testable import LatchkeyCore
@testable import LatchkeyDaemon
import LatchkeyContract

/// A fresh directory under /tmp, removed by `cleanUp`.
private struct Scratch {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.path + "/latchkey-state-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path + "/state/keys", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: path + "/outside", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: path + "/outside/precious", contents: Data("keep".utf8))
        _ = FileManager.default.createFile(atPath: path + "/state/master-key", contents: Data(repeating: 7, count: 32))
    }

    var state: StateDirectory { StateDirectory(root: path + "/state") }
    var outsideIsIntact: Bool { FileManager.default.contents(atPath: path + "/outside/precious") == Data("keep".utf8) }
    var masterKeyIsIntact: Bool { FileManager.default.fileExists(atPath: path + "/state/master-key") }

    func link(_ name: String, to target: String) throws {
        try FileManager.default.createSymbolicLink(atPath: path + "/state/keys/" + name, withDestinationPath: target)
    }

    func cleanUp() { try? FileManager.default.removeItem(atPath: path) }
}

@Suite("state directory")
struct StateDirectoryTests {
    @Test("a key directory resolves to itself, directly inside keys/")
    func contained() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let made = try scratch.state.makeKeyDirectory("ci-1")
        #expect(made == StateDirectory.resolve(scratch.path)! + "/state/keys/ci-1")
        #expect(try scratch.state.contained(scratch.path + "/state/keys/ci-1") == made)
    }

    @Test(
        "the containment check refuses, by itself, paths that leave keys/ or are not a key directory",
        arguments: ["/state/keys/..", "/state/keys/.", "/state/keys", "/state/keys/../..", "/state/keys/../master-key",
                    "/state", "/state/master-key", "/outside", "/outside/precious", "/state/keys/ci-1/..",
                    "/state/keys/ci-1/credentials.db", "/state/keys/ci-1/../../master-key", "/state/keys/missing"]
    )
    func refusesPaths(_ suffix: String) throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        _ = try scratch.state.makeKeyDirectory("ci-1")
        _ = FileManager.default.createFile(atPath: scratch.path + "/state/keys/ci-1/credentials.db", contents: Data())
        #expect(throws: StatePathError.self) { try scratch.state.contained(scratch.path + suffix) }
    }

    @Test("a key directory that is a link out of keys/ is never removed, written or used through")
    func linkedOut() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        try scratch.link("evil", to: scratch.path + "/outside")
        try scratch.link("up", to: "..")
        for name: KeyName in ["evil", "up"] {
            #expect(throws: StatePathError.self) { try scratch.state.removeKeyDirectory(name) }
            #expect(throws: StatePathError.self) { try scratch.state.writeMarker(Data("{}".utf8), of: name) }
            #expect(throws: StatePathError.self) { try scratch.state.makeKeyDirectory(name) }
        }
        #expect(scratch.outsideIsIntact)
        #expect(scratch.masterKeyIsIntact)
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/outside/key.json"))
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/state/key.json"))
    }

    @Test("a keys directory that is itself a link is refused")
    func keysLinked() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        try FileManager.default.removeItem(atPath: scratch.path + "/state/keys")
        try FileManager.default.createDirectory(atPath: scratch.path + "/outside/ci-1", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: scratch.path + "/state/keys", withDestinationPath: scratch.path + "/outside"
        )
        #expect(throws: StatePathError.self) { try scratch.state.removeKeyDirectory("ci-1") }
        #expect(FileManager.default.fileExists(atPath: scratch.path + "/outside/ci-1"))
    }

    @Test("removing a key removes its directory and nothing else; the marker is replaced in place")
    func removes() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        _ = try scratch.state.makeKeyDirectory("a")
        _ = try scratch.state.makeKeyDirectory("b")
        try scratch.state.writeMarker(Data("1".utf8), of: "a")
        try scratch.state.writeMarker(Data("2".utf8), of: "a")
        #expect(FileManager.default.contents(atPath: scratch.state.marker(of: "a")) == Data("2".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/state/keys/a") == ["key.json"])
        try scratch.state.removeKeyDirectory("a")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/state/keys") == ["b"])
        #expect(scratch.masterKeyIsIntact && scratch.outsideIsIntact)
    }
}

// MARK: - The key manager over the state directory

struct NoAttachment: KeyAttachment {
    func uhidStatus() async -> KeyDocument.UHIDStatus { .init(state: .disabled) }
    func usbipStatus() async -> KeyDocument.USBIPStatus? { nil }
    func waitUntilVisible(timeout: Duration) async -> Bool { true }
    func detach() async {}
    func replug() async {}
}

struct NoTransports: TransportHub {
    func attach(_ key: VirtualKey) async -> any KeyAttachment { NoAttachment() }
}

@Suite("key manager and the state directory")
struct KeyManagerStateTests {
    private func manager(_ scratch: Scratch) -> KeyManager {
        var configuration = DaemonConfiguration(stateDirectory: scratch.path + "/state", controlSocket: "/unused")
        configuration.keys = []
        return KeyManager(
            configuration: configuration, masterKey: Array(repeating: 1, count: 32), board: PresenceBoard(),
            transports: NoTransports(), logger: Logger(label: "test")
        )
    }

    @Test("creating a key with a bad name is a 400 naming the rule; nothing is created", arguments: [
        ".", "..", "../x", "a/b", "", "x\0y", ".hidden", String(repeating: "k", count: 65),
    ])
    func badNames(_ name: String) async throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let manager = manager(scratch)
        do {
            _ = try await manager.create(CreateKeyRequest(name: name), by: .daemon)
            Issue.record("created a key named \(name.debugDescription)")
        } catch {
            #expect(error.code == .invalid)
            #expect(error.message.contains(KeyName.grammar))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/state/keys").isEmpty)
        #expect(scratch.masterKeyIsIntact)
    }

    @Test("a key whose directory became a link out of keys/ is not deleted through it")
    func deleteRefusesALink() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let manager = manager(scratch)
        _ = try await manager.create(CreateKeyRequest(name: "ci-1"), by: .daemon)
        let directory = scratch.path + "/state/keys/ci-1"
        try FileManager.default.moveItem(atPath: directory, toPath: scratch.path + "/moved")
        try scratch.link("ci-1", to: scratch.path + "/outside")
        await #expect(throws: CoreError.self) {
            try await manager.delete(manager.grant("ci-1", .manage, by: .daemon))
        }
        #expect(scratch.outsideIsIntact)
        let kept = try await manager.document(manager.grant("ci-1", .see, by: .daemon))
        #expect(kept.name == "ci-1", "the key is still there")
    }

    @Test("a name a directory already holds is refused, not adopted")
    func leftoverDirectory() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        try FileManager.default.createDirectory(atPath: scratch.path + "/state/keys/old", withIntermediateDirectories: true)
        let manager = manager(scratch)
        do {
            _ = try await manager.create(CreateKeyRequest(name: "old"), by: .daemon)
            Issue.record("adopted a leftover directory")
        } catch {
            #expect(error.code == .conflict)
        }
    }

    @Test("at start, directories that are not key names, or whose key.json names another key, are ignored")
    func startIgnoresStrangers() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        for (directory, name) in [(".hidden", ".hidden"), ("b", "a"), ("-x", "-x")] {
            try FileManager.default.createDirectory(atPath: scratch.path + "/state/keys/" + directory, withIntermediateDirectories: true)
            _ = FileManager.default.createFile(
                atPath: scratch.path + "/state/keys/\(directory)/key.json",
                contents: try JSONEncoder().encode(CreateKeyRequest(name: name))
            )
        }
        let manager = manager(scratch)
        try await manager.startAll()
        #expect(await manager.documents(by: .daemon).isEmpty)
    }
}
