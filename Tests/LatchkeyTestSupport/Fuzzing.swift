// What the Swift test targets share for replaying fuzz inputs: the kept crashers a target
// bundles as its `Crashers` resource, and a deterministic generator for sampled inputs.

public import Foundation

/// One kept fuzz input: its file name, for the failure message, and its bytes.
public struct Crasher: Sendable {
    public var name: String
    public var bytes: [UInt8]
}

/// The missing `Crashers` resource directory of a test target.
public struct MissingCrashers: Error, CustomStringConvertible {
    public var description: String { "the Crashers resource directory is missing" }
}

/// Every file in the `Crashers/` resource of `bundle` (a test target's `Bundle.module`),
/// by name, except hidden ones (such as `.keep`) and notes (`*.md`).
public func keptCrashers(in bundle: Bundle) throws -> [Crasher] {
    guard let directory = bundle.url(forResource: "Crashers", withExtension: nil) else {
        throw MissingCrashers()
    }
    return try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
        .filter { !$0.lastPathComponent.hasPrefix(".") && $0.pathExtension != "md" }
        .sorted { $0.lastPathComponent < $1.lastPathComponent }
        .map { Crasher(name: $0.lastPathComponent, bytes: [UInt8](try Data(contentsOf: $0))) }
}

/// A small deterministic generator (SplitMix64), so sampled inputs are the same every run.
public struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Fewer than `limit` bytes: a random count of random bytes.
    public mutating func bytes(below limit: UInt64) -> [UInt8] {
        let count = Int(next() % limit)
        return (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) }
    }
}
