// Reading what a person types: PINs without echo, and yes/no confirmations.
// Both need standard input to be a terminal; scripts give PINs on standard
// input with --pin-stdin instead (never in argv, where `ps` and the shell's
// history would show them) and confirm with --yes.

import Glibc

enum Terminal {
    /// Whether standard input is a terminal a person types on.
    static var isInteractive: Bool { isatty(STDIN_FILENO) == 1 }

    /// Refuses to go on without a terminal to ask for a secret on.
    static func requireInteractive(secret: String = "PINs", stdinFlag: String = "--pin-stdin") throws(CtlError) {
        guard isInteractive else {
            throw CtlError(.usage, "standard input is not a terminal: pass \(stdinFlag) to read \(secret) from it")
        }
    }

    /// Asks for a secret on the terminal with echo off; the prompt goes to
    /// standard error so that standard output stays the command's answer.
    static func readSecret(
        prompt: String,
        secret: String = "PIN",
        stdinFlag: String = "--pin-stdin"
    ) throws(CtlError) -> String {
        try requireInteractive(secret: "the \(secret)", stdinFlag: stdinFlag)
        var settings = termios()
        let canHideEcho = tcgetattr(STDIN_FILENO, &settings) == 0
        if canHideEcho {
            EchoGuard.begin(settings)
            var quiet = settings
            // ECHONL still echoes the newline, so the next prompt starts on a line of its own.
            quiet.c_lflag &= ~tcflag_t(ECHO)
            quiet.c_lflag |= tcflag_t(ECHONL)
            // TCSAFLUSH drops what was typed ahead, and was echoed, before the prompt.
            _ = tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet)
        }
        defer { if canHideEcho { EchoGuard.end() } }
        // Only now: whoever answers the prompt types into a terminal that no longer echoes.
        write(prompt)
        guard let line = readLine(descriptor: STDIN_FILENO) else {
            if canHideEcho { write("\n") }
            throw CtlError(.usage, "no \(secret) entered (end of input)")
        }
        return line
    }

    /// Asks a yes/no question on the terminal; only "y" or "yes" is yes.
    static func confirm(_ question: String) throws(CtlError) -> Bool {
        write("\(question) [y/N] ")
        guard let answer = readLine(descriptor: STDIN_FILENO) else {
            write("\n")
            return false
        }
        return ["y", "yes"].contains(answer.lowercased())
    }

    /// One line of `descriptor` without its line ending ("\n" or "\r\n"),
    /// read a byte at a time so that nothing after it is consumed; nil at
    /// the end of input before any byte.
    static func readLine(descriptor: Int32) -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = Glibc.read(descriptor, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
            if byte == UInt8(ascii: "\n") { break }
            bytes.append(byte)
        }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func write(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}

/// Puts the terminal's echo back however the process ends while a PIN is
/// being typed: normally (`end`), or on a signal that would otherwise leave
/// the person's shell without echo. The signal handler can capture nothing,
/// so the saved settings are process globals, touched only before the
/// handlers are installed and after they are removed.
private enum EchoGuard {
    nonisolated(unsafe) static var saved = termios()
    // Not SIGTSTP: the shell puts its own terminal settings back when a job stops.
    static let signals = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    static func begin(_ settings: termios) {
        saved = settings
        for signal in signals {
            _ = Glibc.signal(signal) { received in
                // Only async-signal-safe calls: restore, then die of the signal as usual.
                _ = tcsetattr(STDIN_FILENO, TCSANOW, &EchoGuard.saved)
                _ = Glibc.signal(received, SIG_DFL)
                _ = Glibc.raise(received)
            }
        }
    }

    static func end() {
        _ = tcsetattr(STDIN_FILENO, TCSANOW, &saved)
        for signal in signals { _ = Glibc.signal(signal, SIG_DFL) }
    }
}
