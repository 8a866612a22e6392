// The helper programs a sealed master key goes through — secret-tool for the
// Secret Service, systemd-creds for systemd's encrypted credentials — run with
// the key on standard input or output, never in an argument or the
// environment, and with a deadline, so that a keyring waiting for a password
// nobody types stops the daemon with an error instead of hanging it.

import Foundation
import Glibc

/// One run of a helper program.
struct KeyTool {
    /// What the program printed and how it ended.
    struct Outcome {
        var status: Int32
        var output: [UInt8]
        var errors: String

        /// Overwrites what the program printed (it may be a key).
        mutating func wipe() {
            output.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
        }
    }

    /// The program's name (looked up in PATH) or path.
    var program: String
    var arguments: [String]
    var environment: [String: String]? = nil
    var timeoutSeconds: Double = 20

    /// Runs the program with `input` on standard input; nil when it cannot be
    /// started (not installed), an error when it outlives the deadline.
    func run(input: [UInt8] = []) throws(MasterKeyError) -> Outcome? {
        guard let executable = Self.find(program, path: environment?["PATH"]) else { return nil }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let stdin = Pipe()
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        do {
            try process.run()
        } catch {
            return nil
        }
        // Both outputs are drained while the program runs, so a full pipe never blocks it.
        let collected = Collected()
        let group = DispatchGroup()
        for (handle, isOutput) in [(stdout.fileHandleForReading, true), (stderr.fileHandleForReading, false)] {
            group.enter()
            DispatchQueue.global().async {
                let data = handle.readDataToEndOfFile()
                collected.set(data, output: isOutput)
                group.leave()
            }
        }
        // A program that ends before reading its input must not end the daemon with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        var input = input
        if !input.isEmpty {
            var data = Data(input)
            try? stdin.fileHandleForWriting.write(contentsOf: data)
            data.resetBytes(in: 0..<data.count)
        }
        input.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
        try? stdin.fileHandleForWriting.close()
        guard group.wait(timeout: .now() + timeoutSeconds) == .success else {
            process.terminate()
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw MasterKeyError(
                .unavailable,
                "\(program) \(arguments.first ?? "") did not finish within \(Int(timeoutSeconds)) s"
                    + " (a locked keyring waiting for its password?)"
            )
        }
        process.waitUntilExit()
        return collected.outcome(status: process.terminationStatus)
    }

    /// `program` itself when it holds a slash, else its first executable in
    /// `path` (the environment's PATH by default).
    static func find(_ program: String, path: String? = nil) -> String? {
        if program.contains("/") { return access(program, X_OK) == 0 ? program : nil }
        let path = path ?? ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(program)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// The outputs of a run, filled from two reader threads.
    private final class Collected: @unchecked Sendable {
        private let lock = NSLock()
        private var output = Data()
        private var errors = Data()

        func set(_ data: Data, output isOutput: Bool) {
            lock.lock()
            defer { lock.unlock() }
            if isOutput { output = data } else { errors = data }
        }

        func outcome(status: Int32) -> Outcome {
            lock.lock()
            defer { lock.unlock() }
            let bytes = [UInt8](output)
            output.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
            let text = String(decoding: errors, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            return Outcome(status: status, output: bytes, errors: text)
        }
    }
}
