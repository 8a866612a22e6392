// A child process for the store's crash tests. It opens a store and loops
// saving credentials and taking signature counter values, printing each
// result on its own line only after the store call returned (so every
// printed line is a durability promise), until it is killed with SIGKILL or
// its time runs out.
//
// Usage: StoreCrashProbe <store path> <master key path> [seconds]
// Output lines: "credential <hex id>" and "counter <scope name> <value>".

import CTAP
import Glibc
import LatchkeyStore

/// The counter scopes the probe uses; the tests read them back by name.
let scopes: [(name: String, scope: [UInt8])] = [
    ("global", []),
    ("fixed", [0x6c, 0x61, 0x74, 0x63, 0x68]),
]

func hex(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}

/// Writes one line straight to the descriptor: no buffer sits between a
/// confirmed operation and the test reading it.
func emit(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    var written = 0
    while written < bytes.count {
        let result = bytes.withUnsafeBytes { write(1, $0.baseAddress! + written, bytes.count - written) }
        if result < 0 {
            if errno == EINTR { continue }
            exit(3)
        }
        written += result
    }
}

func fail(_ message: String) -> Never {
    let bytes = Array(("StoreCrashProbe: " + message + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress!, bytes.count) }
    exit(2)
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else { fail("usage: StoreCrashProbe <store path> <master key path> [seconds]") }
let seconds = arguments.count > 3 ? Int(arguments[3]) ?? 30 : 30
let deadline = time(nil) + seconds

let store: SQLiteCredentialStore
do {
    let masterKey = try MasterKeyFile.loadOrCreate(at: arguments[2])
    store = try SQLiteCredentialStore(path: arguments[1], masterKey: masterKey)
} catch {
    fail("cannot open the store: \(error)")
}
emit("ready")

func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
}

while time(nil) < deadline {
    let id = randomBytes(32)
    let credential = StoredCredential(
        id: id,
        rpId: "probe.example",
        rpIdHash: randomBytes(32),
        rpName: "Probe",
        userId: randomBytes(16),
        userName: "probe",
        userDisplayName: "Probe",
        algorithm: -7,
        privateKey: randomBytes(32),
        credProtect: 1
    )
    do {
        try store.save(credential)
        emit("credential \(hex(id))")
        // Several counter values per save, so kills land both inside and
        // between reservations.
        for _ in 0..<7 {
            for (name, scope) in scopes {
                let value = try store.nextSignatureCounter(scope: scope)
                emit("counter \(name) \(value)")
            }
        }
    } catch {
        fail("store call failed: \(error)")
    }
}
