// Replays every input the CTAP fuzzer (Fuzz/Sources/FuzzCTAP) ever flagged,
// in the fuzzer's input format: byte 0 selects the path (bit 0: U2F APDU,
// else CTAP2; bit 1: power-cycle first; bit 2: advance the clock 31 s), the
// rest is the request. Each must get a well-formed answer.

import CBOR
import Foundation
import LatchkeyTestSupport
import Testing

@testable import CTAP

@Suite("fuzz crashers")
struct CTAPCrasherReplayTests {
    @Test("answers every kept fuzz input with a well-formed response")
    func replay() async throws {
        let key = TestKey(seed: "crashers")
        for crasher in try keptCrashers(in: .module) {
            guard let selector = crasher.bytes.first else { continue }
            let request = Array(crasher.bytes.dropFirst())
            if selector & 0x04 != 0 { key.clock.advance(by: 31_000) }
            if selector & 0x02 != 0 { await key.authenticator.powerCycle() }
            if selector & 0x01 == 0 {
                let response = await key.authenticator.handleCBOR(request)
                #expect(!response.isEmpty, "\(crasher.name)")
                if response.count > 1 {
                    let body = Array(response.dropFirst())
                    #expect(response[0] == 0)
                    #expect(try CBORDecoder().decode(body).encoded() == body)
                }
            } else {
                #expect(await key.authenticator.handleAPDU(request).count >= 2)
            }
        }
    }
}
