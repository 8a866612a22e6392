// ML-DSA (FIPS 204, pure variant, empty context): the post-quantum credential
// algorithms ML-DSA-65 and ML-DSA-87 (COSE -49, -50), through swift-crypto,
// whose BoringSSL has them; OpenSSL 3.0 has none. swift-crypto offers no
// ML-DSA-44, so neither does latchkey. Keys are made from their 32-byte seed
// (FIPS 204 ML-DSA.KeyGen_internal) and kept as that seed, as P-256 and
// Ed25519 keys are.

internal import Crypto

/// An ML-DSA parameter set swift-crypto implements.
public enum MLDSAParameterSet: Sendable, CaseIterable {
    /// ML-DSA-65 (NIST security category 3).
    case mldsa65
    /// ML-DSA-87 (NIST security category 5).
    case mldsa87

    /// The last arc of its object identifier, 2.16.840.1.101.3.4.3.x (RFC 9881 §2).
    var oidLastArc: UInt8 {
        switch self {
        case .mldsa65: 0x12
        case .mldsa87: 0x13
        }
    }
}

/// An ML-DSA key pair, built from its 32-byte seed.
public struct MLDSAPrivateKey: Sendable {
    /// The bytes of a seed.
    public static let seedByteCount = 32

    private enum Key {
        case mldsa65(MLDSA65.PrivateKey)
        case mldsa87(MLDSA87.PrivateKey)
    }

    private let key: Key

    /// The parameter set.
    public let parameterSet: MLDSAParameterSet
    /// The 32-byte seed the key pair is made from.
    public let seed: [UInt8]
    /// The public key in FIPS 204's encoding (1952 bytes for ML-DSA-65, 2592 for ML-DSA-87).
    public let publicKey: [UInt8]

    /// The key pair of `parameterSet` whose seed is `seed`; throws `.invalidKey` unless it is 32 bytes.
    public init(_ parameterSet: MLDSAParameterSet, seed: [UInt8]) throws(CryptoError) {
        guard seed.count == Self.seedByteCount else {
            throw CryptoError(.invalidKey, "an ML-DSA seed must be \(Self.seedByteCount) bytes, got \(seed.count)")
        }
        do {
            switch parameterSet {
            case .mldsa65:
                let key = try MLDSA65.PrivateKey(seedRepresentation: seed, publicKey: nil)
                self.key = .mldsa65(key)
                publicKey = Array(key.publicKey.rawRepresentation)
            case .mldsa87:
                let key = try MLDSA87.PrivateKey(seedRepresentation: seed, publicKey: nil)
                self.key = .mldsa87(key)
                publicKey = Array(key.publicKey.rawRepresentation)
            }
        } catch {
            throw CryptoError(.invalidKey, "ML-DSA key generation from a seed failed: \(error)")
        }
        self.parameterSet = parameterSet
        self.seed = seed
    }

    /// The key pair in a PKCS#8 PrivateKeyInfo DER (RFC 9881 §6) whose
    /// private key holds its seed: the `seed` form (the one this key
    /// writes, as Python's `cryptography` does) or the `both` form (OpenSSL
    /// 3.5's default), whose expanded key must start with the seed's public
    /// ρ. Throws `.invalidKey` for anything else, the `expandedKey` form
    /// included: it cannot be brought back to a seed.
    public init(pkcs8DERRepresentation der: [UInt8]) throws(CryptoError) {
        let invalid = CryptoError(.invalidKey, "not an ML-DSA-65 or ML-DSA-87 PKCS#8 key holding its seed")
        guard let info = DER.read(der, at: 0), info.tag == 0x30, info.end == der.count,
            let version = DER.read(der, at: info.content.lowerBound), version.tag == 0x02, der[version.content] == [0],
            let algorithm = DER.read(der, at: version.end), algorithm.tag == 0x30,
            let privateKey = DER.read(der, at: algorithm.end), privateKey.tag == 0x04, privateKey.end == der.count,
            let parameterSet = MLDSAParameterSet.allCases.first(where: {
                Array(der[algorithm.start..<algorithm.end]) == Self.algorithmIdentifier($0)
            }),
            let choice = DER.read(der, at: privateKey.content.lowerBound), choice.end == privateKey.end
        else { throw invalid }
        switch choice.tag {
        case 0x80:
            try self.init(parameterSet, seed: Array(der[choice.content]))
        case 0x30:
            guard let seed = DER.read(der, at: choice.content.lowerBound), seed.tag == 0x04,
                let expanded = DER.read(der, at: seed.end), expanded.tag == 0x04, expanded.end == choice.end,
                expanded.content.count >= 32
            else { throw invalid }
            try self.init(parameterSet, seed: Array(der[seed.content]))
            guard Array(der[expanded.content.prefix(32)]) == Array(publicKey.prefix(32)) else {
                throw CryptoError(.invalidKey, "an ML-DSA PKCS#8 key's seed and expanded key disagree")
            }
        default:
            throw invalid
        }
    }

    /// The key pair as PKCS#8 PrivateKeyInfo DER, seed form (RFC 9881 §6):
    /// SEQUENCE { INTEGER 0, SEQUENCE { OID id-ml-dsa-N }, OCTET STRING { [0] seed } }.
    public var pkcs8DERRepresentation: [UInt8] {
        Self.pkcs8Prefix(parameterSet) + seed
    }

    /// AlgorithmIdentifier { id-ml-dsa-N }, parameters absent (RFC 9881 §2).
    private static func algorithmIdentifier(_ parameterSet: MLDSAParameterSet) -> [UInt8] {
        [0x30, 0x0B, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x03, parameterSet.oidLastArc]
    }

    /// Everything of the seed form's DER before the 32 seed bytes.
    private static func pkcs8Prefix(_ parameterSet: MLDSAParameterSet) -> [UInt8] {
        let privateKey: [UInt8] = [0x04, 0x22, 0x80, 0x20]
        let body: [UInt8] = [0x02, 0x01, 0x00] + algorithmIdentifier(parameterSet) + privateKey
        return [0x30, UInt8(body.count + seedByteCount)] + body
    }

    /// The ML-DSA signature of `message` (pure ML-DSA, empty context; FIPS 204
    /// Algorithm 2), 3309 bytes for ML-DSA-65 and 4627 for ML-DSA-87. Hedged:
    /// two signatures of one message differ.
    public func signature(for message: [UInt8]) throws(CryptoError) -> [UInt8] {
        do {
            switch key {
            case .mldsa65(let key): return Array(try key.signature(for: message))
            case .mldsa87(let key): return Array(try key.signature(for: message))
            }
        } catch {
            throw CryptoError(.invalidInput, "ML-DSA signing failed: \(error)")
        }
    }

    /// Whether `signature` is this key's valid signature of `message`.
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        switch key {
        case .mldsa65(let key): key.publicKey.isValidSignature(signature, for: message)
        case .mldsa87(let key): key.publicKey.isValidSignature(signature, for: message)
        }
    }
}

/// Just enough DER reading for a PKCS#8 key: one tag-length-value at a time,
/// definite lengths of up to four bytes, every bound checked.
private enum DER {
    struct Element {
        var tag: UInt8
        var start: Int
        var content: Range<Int>
        var end: Int { content.upperBound }
    }

    /// The element at `start` of `bytes`, or nil when it does not fit.
    static func read(_ bytes: [UInt8], at start: Int) -> Element? {
        guard start >= 0, start + 2 <= bytes.count else { return nil }
        var cursor = start + 1
        var length = Int(bytes[cursor])
        cursor += 1
        if length & 0x80 != 0 {
            let count = length & 0x7F
            guard (1...4).contains(count), cursor + count <= bytes.count else { return nil }
            length = bytes[cursor..<cursor + count].reduce(0) { $0 << 8 | Int($1) }
            cursor += count
        }
        guard length <= bytes.count - cursor else { return nil }
        return Element(tag: bytes[start], start: start, content: cursor..<cursor + length)
    }
}
