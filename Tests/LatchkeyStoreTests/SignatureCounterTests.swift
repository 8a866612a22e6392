// The reservation arithmetic of SignatureCounter, without a database.

import CTAP
import Testing

@testable import LatchkeyStore

@Suite("Signature counter reservations")
struct SignatureCounterTests {
    @Test("a fresh scope reserves a block before handing out 1")
    func freshScope() throws {
        var counter = try SignatureCounter(persisted: nil, scope: "s")
        #expect(try counter.reservationNeeded(scope: "s") == 1 + SignatureCounter.block)
        counter.reserved(upTo: 1 + SignatureCounter.block)
        for expected in 1...UInt32(SignatureCounter.block) {
            #expect(try counter.reservationNeeded(scope: "s") == nil)
            #expect(counter.take() == expected)
        }
        #expect(try counter.reservationNeeded(scope: "s") == 1 + 2 * SignatureCounter.block)
    }

    @Test("a persisted reservation resumes at its bound")
    func resumes() throws {
        let counter = try SignatureCounter(persisted: 65, scope: "s")
        #expect(counter.next == 65)
        #expect(try counter.reservationNeeded(scope: "s") == 65 + SignatureCounter.block)
    }

    @Test("the last reservation stops at UInt32.max and then the counter is exhausted")
    func lastBlock() throws {
        var counter = try SignatureCounter(persisted: Int64(UInt32.max) - 1, scope: "s")
        let bound = try #require(try counter.reservationNeeded(scope: "s"))
        #expect(bound == SignatureCounter.end)
        counter.reserved(upTo: bound)
        #expect(counter.take() == UInt32.max - 1)
        #expect(counter.take() == UInt32.max)
        #expect(throws: StoreError.self) { try counter.reservationNeeded(scope: "s") }
    }

    @Test("an out-of-range persisted reservation is corrupt", arguments: [0, -1, Int64(UInt32.max) + 2])
    func outOfRange(persisted: Int64) {
        #expect(throws: StoreError(.corrupt, "")) { try SignatureCounter(persisted: persisted, scope: "s") }
    }
}
