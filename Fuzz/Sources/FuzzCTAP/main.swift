// libFuzzer target for the CTAP request path: CTAPHID_CBOR requests and U2F
// APDUs into one long-lived authenticator (so sequences such as getAssertion
// then getNextAssertion are reachable), with a deterministic environment.
//
// Input: byte 0 chooses the path (even: CTAP2 CBOR, odd: U2F APDU; bit 1 also
// power-cycles the key first, bit 2 advances the clock 31 s), the rest is the
// request. Invariants: no trap, a response always, a CTAP2 success body that is
// canonical CBOR, a CTAP2 error with no body, a U2F response ending in a status word.

import CBOR
import CTAP
import Dispatch
import Synchronization

let clock = ManualClock()
let presence = FixedPresence(.approved)
let authenticator: Authenticator = {
    let entropy = DeterministicEntropy(seed: Array("latchkey fuzz".utf8))
    let aaguid = Array(repeating: UInt8(0x5A), count: 16)
    let identity = try! AttestationIdentity.generate(aaguid: aaguid, entropy: entropy, now: 1_790_000_000)
    // Every algorithm but RSA: deriving an RSA-2048 key takes ~0.15 s (a search for
    // primes), so inputs that reach it would dominate a run; RSA's COSE and signing
    // code is pinned by the unit tests (AlgorithmTests, RSATests) instead.
    let algorithms = COSEAlgorithm.defaultOrder.filter { $0 != .rs256 && $0 != .ps256 }
    return try! Authenticator(
        configuration: AuthenticatorConfiguration(
            aaguid: aaguid, attestation: .batch, attestationIdentity: identity, algorithms: algorithms,
            maxDiscoverableCredentials: 64,
            // Every extension, those off by default (previewSign) too.
            enabledExtensions: Set(ExtensionIdentifier.supported)
        ),
        store: MemoryCredentialStore(), presence: presence, clock: clock, entropy: entropy
    )
}()

/// Runs an async call to completion from libFuzzer's synchronous callback.
func blocking(_ body: @escaping @Sendable () async -> [UInt8]) -> [UInt8] {
    let done = DispatchSemaphore(value: 0)
    let result = Mutex<[UInt8]>([])
    Task {
        let value = await body()
        result.withLock { $0 = value }
        done.signal()
    }
    done.wait()
    return result.withLock { $0 }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCTAP(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard let selector = bytes.first else { return 0 }
    let request = Array(bytes.dropFirst())
    if selector & 0x04 != 0 { clock.advance(by: 31_000) }
    if selector & 0x01 == 0 {
        let response = blocking {
            if selector & 0x02 != 0 { await authenticator.powerCycle() }
            return await authenticator.handleCBOR(request)
        }
        precondition(!response.isEmpty, "no status")
        if response.count > 1 {
            precondition(response[0] == 0, "an error status with a body")
            let body = Array(response.dropFirst())
            guard let value = try? CBORDecoder().decode(body) else { preconditionFailure("a body that is not CBOR") }
            precondition(value.encoded() == body, "a body that is not canonical")
        }
    } else {
        let response = blocking { await authenticator.handleAPDU(request) }
        precondition(response.count >= 2, "no status word")
    }
    return 0
}
