// The previewSign extension (the WebAuthn sign extension, version 4 as
// python-fido2 2.2.1 and Yubico's device suite speak it): its inputs and
// outputs on the wire, its algorithms, and its signing keys.
//
// makeCredential input "previewSign" (generateKey):
//
// | key | name       | type |
// |-----|------------|------|
// | 3   | algorithms | array of COSE algorithm identifiers, most preferred first |
// | 4   | flags      | unsigned: 0b000 none, 0b001 UP required, 0b101 UP and UV required |
//
// getAssertion input "previewSign" (sign):
//
// | key | name           | type |
// |-----|----------------|------|
// | 2   | keyHandle      | bytes: the signing key's handle (its credential ID in the inner attestation) |
// | 6   | tbs            | bytes: the message, or its SHA-256 digest for a split algorithm |
// | 7   | additionalArgs | bytes: CBOR COSE_Sign_Args, {3: alg, -1: kh, -2: ctx} for ARKG |
//
// Outputs: makeCredential's signed {3: alg} in authenticatorData and the
// unsigned {7: attestation object} (a CBOR map {1: fmt, 2: authData, 3:
// attStmt} whose attested credential is the signing key: its handle and
// public key, with {3: alg, 4: flags} as the inner authData's previewSign
// output); getAssertion's signed {6: signature}.
//
// Signing keys are not stored. A key handle is
//
// | version (1) | alg tag (1) | flags (1) | nonce (16) | MAC (16) |
//
// and the key is derived from the credential's own secret (its key's
// 32-byte seed, or its PKCS#8 for an imported key without one) and the
// handle's first 19 bytes: root = HKDF-SHA-256(secret, info
// "latchkey/previewSign/v1"); MAC = HMAC(root, 0x00 || header)[0..16];
// the P-256 scalar = HMAC(root, 0x01 || header); ARKG's ikm_bl and ikm_kem
// = HMAC(root, 0x02 || header) and HMAC(root, 0x03 || header). A handle
// is usable only with the credential it was made for, and its flags
// cannot be changed without changing the key. The keys therefore live as
// long as the credential does: they survive a CXF export and import with
// it, and go with it.

import CBOR
import LatchkeyCrypto

/// The algorithms previewSign generates keys for, in the order a request's
/// list is tried against (the request's own order decides).
public enum PreviewSignAlgorithm: Int, Sendable, CaseIterable {
    /// ESP256 (RFC 9864): ECDSA P-256 with SHA-256 over `tbs`.
    case esp256 = -9
    /// ES256: the same signature, the polymorphic identifier.
    case es256 = -7
    /// ESP256-split (draft-lundberg-cose-two-party-signing-algs-06, the
    /// requested assignment): `tbs` is the SHA-256 digest, signed as given.
    case esp256Split = -300
    /// ESP256-split under the placeholder some prototypes use.
    case esp256SplitPlaceholder = -70009
    /// ESP256-split with a key derived by ARKG-P256
    /// (draft-bradleylundberg-cfrg-arkg-10 §8.3, placeholder value).
    case esp256SplitARKG = -65539

    /// The COSE identifier of ARKG-P256 public seeds (placeholder).
    public static let arkgP256 = -65700
    /// The COSE key type of ARKG public seeds (placeholder).
    public static let arkgPublicKeyType = -65537

    /// Whether `tbs` is a SHA-256 digest the platform computed.
    public var prehashed: Bool { self != .esp256 && self != .es256 }

    /// The algorithm third parties verify signatures with (the public key's
    /// `alg`): ES256 for ES256, ESP256 for the rest.
    var verificationAlgorithm: COSEAlgorithm { self == .es256 ? .es256 : .esp256 }

    /// The handle's algorithm byte; a released value never changes.
    var tag: UInt8 {
        switch self {
        case .esp256: 1
        case .es256: 2
        case .esp256Split: 3
        case .esp256SplitPlaceholder: 4
        case .esp256SplitARKG: 5
        }
    }

    init?(tag: UInt8) {
        guard let algorithm = Self.allCases.first(where: { $0.tag == tag }) else { return nil }
        self = algorithm
    }
}

/// The flags a signing key is made with (generateKey input 4).
public struct PreviewSignFlags: Sendable, Equatable {
    public var rawValue: UInt8

    /// Every signature needs user presence.
    public var requiresUserPresence: Bool { rawValue & 0b001 != 0 }
    /// Every signature needs user verification.
    public var requiresUserVerification: Bool { rawValue & 0b100 != 0 }

    /// The flags for `value`, or nil unless it is 0b000, 0b001 or 0b101
    /// (user verification only with presence).
    public init?(_ value: UInt64) {
        guard value == 0b000 || value == 0b001 || value == 0b101 else { return nil }
        rawValue = UInt8(value)
    }
}

/// The previewSign input of makeCredential (generateKey).
public struct PreviewSignGenerateKeyInput: Sendable {
    /// 3, algorithms: COSE identifiers, most preferred first.
    public var algorithms: [Int]
    /// 4, flags, as sent (checked by the command: a bad value is an option
    /// error, not a type error).
    public var flags: UInt64

    init(cbor: CBORValue) throws(CBORError) {
        let map = try cbor.mapValue("previewSign")
        var algorithms: [Int] = []
        for element in try map.required(0x03, "previewSign.algorithms").arrayValue("previewSign.algorithms") {
            algorithms.append(try element.intValue("previewSign.algorithms[]"))
        }
        self.algorithms = algorithms
        flags = try map.required(0x04, "previewSign.flags").unsignedValue("previewSign.flags")
    }
}

/// The previewSign input of getAssertion (sign). keyHandle and tbs are
/// optional here because their absence is CTAP2_ERR_INVALID_OPTION, which
/// the command answers.
public struct PreviewSignSignInput: Sendable {
    /// 2, keyHandle.
    public var keyHandle: [UInt8]?
    /// 6, tbs.
    public var tbs: [UInt8]?
    /// 7, additionalArgs: encoded COSE_Sign_Args.
    public var additionalArgs: [UInt8]?

    init(cbor: CBORValue) throws(CBORError) {
        let map = try cbor.mapValue("previewSign")
        keyHandle = try map[int: 0x02]?.bytesValue("previewSign.keyHandle")
        tbs = try map[int: 0x06]?.bytesValue("previewSign.tbs")
        additionalArgs = try map[int: 0x07]?.bytesValue("previewSign.additionalArgs")
    }
}

/// COSE_Sign_Args for ESP256-split-ARKG (draft-bradleylundberg-cfrg-arkg-10
/// §8.4): {3: alg, -1: kh, -2: ctx}; other keys are ignored.
struct ARKGSignArguments: Sendable {
    /// 3, alg; nil when absent.
    var alg: Int?
    /// -1, the ARKG key handle.
    var keyHandle: [UInt8]
    /// -2, the ARKG ctx.
    var ctx: [UInt8]

    init(cbor: CBORValue) throws(CBORError) {
        let map = try cbor.mapValue("additionalArgs")
        alg = try map[int: 3]?.intValue("additionalArgs.alg")
        keyHandle = try map.required(-1, "additionalArgs.kh").bytesValue("additionalArgs.kh")
        ctx = try map.required(-2, "additionalArgs.ctx").bytesValue("additionalArgs.ctx")
    }
}

/// A signing key bound to a credential, as its handle describes it.
struct PreviewSignKey: Sendable {
    static let version: UInt8 = 1
    static let nonceLength = 16
    static let macLength = 16
    static let headerLength = 3 + nonceLength
    /// The length of every handle latchkey issues.
    static let keyHandleLength = headerLength + macLength
    static let rootInfo = Array("latchkey/previewSign/v1".utf8)

    var algorithm: PreviewSignAlgorithm
    var flags: PreviewSignFlags
    var keyHandle: [UInt8]
    /// The P-256 key, or for ESP256-split-ARKG the blinding half of the seed.
    var key: P256PrivateKey
    /// The ARKG seed, for ESP256-split-ARKG.
    var arkgSeed: ARKGP256.PrivateSeed?

    /// A new key for the credential whose secret is `secret`. The nonce is
    /// drawn again in the (2^-32) case that it gives no valid P-256 scalar;
    /// failing eight times means the crypto library itself fails.
    static func generate(
        _ algorithm: PreviewSignAlgorithm,
        flags: PreviewSignFlags,
        secret: [UInt8],
        entropy: any EntropySource
    ) throws(CryptoError) -> Self {
        let root = rootKey(secret)
        var attempt = 0
        while true {
            let header = [version, algorithm.tag, flags.rawValue] + entropy.bytes(count: nonceLength)
            let handle =
                header + Array(HMACSHA256.authenticationCode(key: root, message: [0x00] + header).prefix(macLength))
            do {
                return try derive(header: header, handle: handle, algorithm: algorithm, flags: flags, root: root)
            } catch {
                attempt += 1
                if attempt == 8 { throw error }
            }
        }
    }

    /// The key `keyHandle` names for the credential whose secret is
    /// `secret`, or nil when it is not one of that credential's handles.
    static func open(_ keyHandle: [UInt8], secret: [UInt8]) -> Self? {
        guard keyHandle.count == keyHandleLength, keyHandle[0] == version,
            let algorithm = PreviewSignAlgorithm(tag: keyHandle[1]),
            let flags = PreviewSignFlags(UInt64(keyHandle[2]))
        else { return nil }
        let root = rootKey(secret)
        let header = Array(keyHandle[..<headerLength])
        let mac = HMACSHA256.authenticationCode(key: root, message: [0x00] + header).prefix(macLength)
        guard constantTimeEqual(Array(mac), Array(keyHandle[headerLength...])) else { return nil }
        return try? derive(header: header, handle: keyHandle, algorithm: algorithm, flags: flags, root: root)
    }

    private static func rootKey(_ secret: [UInt8]) -> [UInt8] {
        HKDFSHA256.deriveKey(inputKeyMaterial: secret, salt: [], info: rootInfo, outputByteCount: 32)
    }

    private static func derive(
        header: [UInt8],
        handle: [UInt8],
        algorithm: PreviewSignAlgorithm,
        flags: PreviewSignFlags,
        root: [UInt8]
    ) throws(CryptoError) -> Self {
        func material(_ label: UInt8) -> [UInt8] { HMACSHA256.authenticationCode(key: root, message: [label] + header) }
        guard algorithm == .esp256SplitARKG else {
            let key = try P256PrivateKey(rawRepresentation: material(0x01))
            return Self(algorithm: algorithm, flags: flags, keyHandle: handle, key: key)
        }
        let seed = try ARKGP256.deriveSeed(ikmBlinding: material(0x02), ikmKEM: material(0x03))
        return Self(algorithm: algorithm, flags: flags, keyHandle: handle, key: seed.blinding, arkgSeed: seed)
    }

    /// The public key as the inner attestation carries it: an EC2 COSE_Key
    /// with the verification algorithm, or for ARKG the public seed
    /// {1: kty ARKG-pub, 3: ARKG-P256, -1: pk_bl, -2: pk_kem, -3: ESP256}.
    var publicCOSEKey: CBORValue {
        func ec2(_ key: P256PublicKey, alg: Int) -> CBORValue {
            .intMap([(1, 2), (3, .int(alg)), (-1, 1), (-2, .bytes(key.x)), (-3, .bytes(key.y))])
        }
        guard let seed = arkgSeed?.publicSeed else {
            return ec2(key.publicKey, alg: algorithm.verificationAlgorithm.rawValue)
        }
        return .intMap([
            (1, .int(PreviewSignAlgorithm.arkgPublicKeyType)), (3, .int(PreviewSignAlgorithm.arkgP256)),
            // pk_bl is an ES256 key, pk_kem an ECDH-ES + HKDF-256 one (-25),
            // as the draft's examples label them.
            (-1, ec2(seed.blinding, alg: COSEAlgorithm.es256.rawValue)), (-2, ec2(seed.kem, alg: -25)),
            (-3, .int(COSEAlgorithm.esp256.rawValue)),
        ])
    }
}
