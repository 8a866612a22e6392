// The daemon's own directories: created private, and refused (with how to fix
// it) when another account owns one, when group or others may write it, when
// it is a symbolic link, or when a directory above it lets someone else swap
// it. Another account is played by a checker for a uid other than ours; the
// real thing (lk-other's /tmp/latchkey) is Tests/e2e/test_doors.py.

import Foundation
import Glibc
import Testing

@testable import LatchkeyCore
@testable import LatchkeyDaemon

/// A fresh directory under /tmp (root-owned and sticky, as /tmp is), removed by `cleanUp`.
private struct Scratch {
    let path = FileManager.default.temporaryDirectory.path + "/latchkey-private-\(UUID().uuidString)"

    init() throws {
        #expect(mkdir(path, 0o700) == 0)
    }

    func cleanUp() { try? FileManager.default.removeItem(atPath: path) }
}

private func refusal(_ path: String, by checker: PrivateDirectory = PrivateDirectory()) -> String? {
    do {
        try checker.prepare(path, role: "state directory")
        return nil
    } catch {
        return error.message
    }
}

@Suite("private directories")
struct PrivateDirectoryTests {
    @Test("a missing directory is made 0700, with its missing parents") func creates() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let path = scratch.path + "/a/b/state"
        #expect(refusal(path) == nil)
        for directory in [scratch.path + "/a", scratch.path + "/a/b", path] {
            var status = stat()
            #expect(lstat(directory, &status) == 0)
            #expect(status.st_mode & 0o7777 == 0o700)
        }
        // And it passes again as it is.
        #expect(refusal(path) == nil)
    }

    @Test("a directory of another account is refused, naming it and what to do") func otherOwner() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let stranger = PrivateDirectory(uid: getuid() &+ 4242, gid: getgid())
        let message = try #require(refusal(scratch.path, by: stranger))
        #expect(message.contains("belongs to uid \(getuid())"))
        #expect(message.contains("Remove it"))
    }

    @Test("a directory group or others may write is refused with the chmod that fixes it", arguments: [0o770, 0o777, 0o1777, 0o730] as [mode_t])
    func writable(mode: mode_t) throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        chmod(scratch.path, mode)
        let message = try #require(refusal(scratch.path))
        #expect(message.contains("chmod go-w \(scratch.path)"))
        // Read and search for the group are fine (the socket's group enters /run/latchkeyd).
        chmod(scratch.path, 0o750)
        #expect(refusal(scratch.path) == nil)
    }

    @Test("a symbolic link is refused, even to a good directory") func link() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        #expect(mkdir(scratch.path + "/real", 0o700) == 0)
        #expect(symlink(scratch.path + "/real", scratch.path + "/state") == 0)
        #expect(refusal(scratch.path + "/state")?.contains("symbolic link") == true)
    }

    @Test("a parent anyone may write is refused unless it is sticky") func parents() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        chmod(scratch.path, 0o777)
        let message = try #require(refusal(scratch.path + "/state"))
        #expect(message.contains("\(scratch.path), a directory above it, is writable by every account"))
        chmod(scratch.path, 0o1777)
        #expect(refusal(scratch.path + "/state") == nil)
    }

    @Test("a parent of another account is refused") func parentOwner() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        #expect(mkdir(scratch.path + "/mine", 0o700) == 0)
        // For an account that is neither root nor us, our directory is someone else's.
        let stranger = PrivateDirectory(uid: getuid() &+ 4242, gid: getgid())
        let message = try #require(refusal(scratch.path + "/mine/state", by: stranger))
        #expect(message.contains("a directory above it, belongs to uid \(getuid())") == (getuid() != 0))
    }

    @Test("a link on the way is judged where it leads") func linkedParent() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        #expect(mkdir(scratch.path + "/open", 0o777) == 0)
        chmod(scratch.path + "/open", 0o777)
        #expect(symlink(scratch.path + "/open", scratch.path + "/via") == 0)
        #expect(refusal(scratch.path + "/via/state")?.contains("writable by every account") == true)
    }

    @Test("a relative path is judged from the working directory") func relative() {
        #expect(PrivateDirectory.absolute("state") == FileManager.default.currentDirectoryPath + "/state")
        #expect(PrivateDirectory.absolute("/var/lib/latchkeyd") == "/var/lib/latchkeyd")
        #expect(PrivateDirectory.parents(of: "/a/b/c") == ["/a/b", "/a", "/"])
    }
}
