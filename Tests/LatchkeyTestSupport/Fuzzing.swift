// What the Swift test targets share for replaying fuzz inputs: the kept crashers a target
// bundles as its `Crashers` resource, a deterministic generator for sampled inputs, and
// the replay of both through a fuzz driver that reports broken invariants.

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

/// "name: violations" for each kept crasher of `bundle` that breaks an invariant of `driver`
/// (a fuzz driver's `run`, which returns the invariants an input broke); empty when all hold.
public func crashersBreakingInvariants(in bundle: Bundle, of driver: ([UInt8]) -> [String]) throws -> [String] {
    try keptCrashers(in: bundle).compactMap { crasher in
        let violations = driver(crasher.bytes)
        return violations.isEmpty ? nil : "\(crasher.name): \(violations)"
    }
}

/// "input: violations" for each of `count` generated inputs that breaks an invariant of
/// `driver`; empty when all hold. Each input is fewer than `limit` random bytes from a
/// `SplitMix64` seeded with `seed`; about half, chosen by the generator, go through `bias`
/// first, to reach the deeper states a random input seldom does.
public func generatedInputsBreakingInvariants(
    seed: UInt64,
    count: Int,
    below limit: UInt64,
    biasingHalf bias: ([UInt8]) -> [UInt8],
    of driver: ([UInt8]) -> [String]
) -> [String] {
    var generator = SplitMix64(seed: seed)
    var failures: [String] = []
    for _ in 0..<count {
        var input = generator.bytes(below: limit)
        if generator.next() % 2 == 0 {
            input = bias(input)
        }
        let violations = driver(input)
        if !violations.isEmpty { failures.append("\(input): \(violations)") }
    }
    return failures
}
