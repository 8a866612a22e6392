// Giving unused pages back: which mappings of /proc/self/smaps may be dropped
// (read-only file mappings with no private page) and which never (writable
// ones, relocated RELRO data, anonymous memory), and a real release in this
// process, after which its code and data still work.

import Glibc
import Testing

@testable import LatchkeyCore
@testable import LatchkeyDaemon

@Suite("giving unused pages back")
struct ResidentMemoryTests {
    static let smaps = """
        5600aa000000-5600ab000000 r-xp 00000000 fe:00 123                        /usr/bin/latchkeyd
        Size:              16384 kB
        Rss:                9000 kB
        Anonymous:             0 kB
        VmFlags: rd ex mr mw me
        5600ab000000-5600ab100000 r--p 01000000 fe:00 123                        /usr/bin/latchkeyd
        Rss:                1084 kB
        Anonymous:          1084 kB
        5600ab100000-5600ab200000 rw-p 01100000 fe:00 123                        /usr/bin/latchkeyd
        Rss:                 400 kB
        Anonymous:           120 kB
        5600ab200000-5600ab300000 rw-p 00000000 00:00 0 
        Rss:                 536 kB
        Anonymous:           536 kB
        7f0000000000-7f0000100000 r--p 00000000 fe:00 77                         /usr/lib/x86_64-linux-gnu/libcrypto.so.3
        Rss:                 392 kB
        Anonymous:             0 kB
        7f0000100000-7f0000101000 r--s 00000000 fe:00 78                         /var/lib/latchkey/my key/credentials.db
        Rss:                   4 kB
        Anonymous:             0 kB
        7f0000200000-7f0000201000 r--p 00000000 fe:00 79                         /usr/lib/never-touched.so
        Rss:                   0 kB
        Anonymous:             0 kB
        7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
        Rss:                   8 kB
        Anonymous:             0 kB
        """

    @Test("each mapping is read with its bounds, permissions, path and page counts")
    func parsing() {
        let mappings = ResidentMemory.mappings(smaps: Self.smaps[...])
        #expect(mappings.count == 8)
        #expect(
            mappings.first
                == ResidentMemory.Mapping(
                    start: 0x5600_aa00_0000, end: 0x5600_ab00_0000, permissions: "r-xp", path: "/usr/bin/latchkeyd",
                    anonymousKilobytes: 0, residentKilobytes: 9000
                ))
        #expect(mappings[5].path == "/var/lib/latchkey/my key/credentials.db", "a path with a space is kept whole")
        #expect(mappings[3].path == "")
    }

    @Test("only read-only file mappings with resident pages and no private page are released")
    func releasable() {
        let released = ResidentMemory.mappings(smaps: Self.smaps[...]).filter(\.releasable).map(\.path)
        // Code, a library's constants and a read-only shared file mapping; not the
        // relocated RELRO data (private pages), not writable data, not anonymous
        // memory, not the vDSO, and nothing where nothing is resident.
        #expect(released == ["/usr/bin/latchkeyd", "/usr/lib/x86_64-linux-gnu/libcrypto.so.3", "/var/lib/latchkey/my key/credentials.db"])
    }

    @Test("garbage lines are skipped, not misread")
    func garbage() {
        let text = "not a mapping\nRss: 12 kB\nzzzz-yyyy r-xp 0 0 0 /x\n10-20 r-xp 0 0 0 /y\nRss: nine kB\n"
        let mappings = ResidentMemory.mappings(smaps: text[...])
        #expect(mappings.map(\.path) == ["/y"])
        #expect(mappings.first?.residentKilobytes == 0)
    }

    @Test("a release in this process gives pages back, and its code and data still work")
    func releaseInProcess() throws {
        var data = [UInt8](repeating: 7, count: 1 << 20)
        let (before, after) = try #require(ResidentMemory.release())
        #expect(before > 0 && after > 0)
        // Writable memory kept its contents; code runs after its pages were dropped.
        #expect(data.allSatisfy { $0 == 7 })
        data[0] = 8
        #expect(String(describing: data[0]) == "8")
        let mappings = ResidentMemory.mappings(smaps: try #require(ResidentMemory.readProc("/proc/self/smaps"))[...])
        #expect(mappings.contains { $0.permissions.contains("x") && $0.path.hasPrefix("/") })
    }

    @Test("activity counts up")
    func activity() {
        let before = DaemonActivity.count
        DaemonActivity.note()
        #expect(DaemonActivity.count > before)
    }
}
