// The bench's command line: `latchkey-bench [ITERATIONS] [--daemon PATH]`.

import Glibc

/// The command line: an iteration count and the daemon to measure USB/IP through, which
/// `$LATCHKEYD` names when --daemon does not.
struct Options {
    static let usage = "usage: latchkey-bench [ITERATIONS] [--daemon PATH]   (or LATCHKEYD=PATH)"

    var iterations = 2000
    var daemon: String?

    init(arguments: [String], environment: [String: String]) throws(BenchFailure) {
        daemon = environment["LATCHKEYD"].flatMap { $0.isEmpty ? nil : $0 }
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            if argument == "--daemon" {
                guard let path = rest.popFirst() else { throw BenchFailure("--daemon needs a path") }
                daemon = path
            } else if let count = Int(argument), count > 0 {
                iterations = count
            } else {
                throw BenchFailure("unexpected argument \(argument)")
            }
        }
        if let daemon, access(daemon, X_OK) != 0 {
            throw BenchFailure("no executable latchkeyd at \(daemon)")
        }
    }
}
