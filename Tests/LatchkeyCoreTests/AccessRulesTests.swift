// The access rules (Keys/Access.swift) as a table: each tier for the key's
// owner, root and another account.

import Testing

@testable import LatchkeyCore

@Suite struct AccessRulesTests {
    static let owner: UInt32 = 1000

    @Test(
        "the owner holds every tier; root sees, manages and attaches; another account holds none",
        arguments: KeyAccess.allCases
    )
    func tiers(access: KeyAccess) throws {
        let root = Caller(uid: 0)
        let other = Caller(uid: 1001)
        #expect(throws: Never.self) {
            try AccessRules.check(access, caller: Caller(uid: Self.owner), key: "k", owner: Self.owner)
        }
        let rootHolds = [KeyAccess.see, .manage, .attach].contains(access)
        #expect(AccessRules.allows(access, caller: root, owner: Self.owner) == rootHolds)
        #expect(!AccessRules.allows(access, caller: other, owner: Self.owner))
        let refusal = #expect(throws: AccessRefusal.self) {
            try AccessRules.check(access, caller: other, key: "k", owner: Self.owner)
        }
        #expect(refusal?.rule == (rootHolds ? "owner-or-root" : "owner-only"))
        #expect(refusal?.reason.contains("uid 1001") == true)
        #expect(refusal?.reason.contains("uid 1000") == true)
    }

    @Test("root owns what it owns: a root-owned key gives root every tier")
    func rootOwner() {
        for access in KeyAccess.allCases {
            #expect(AccessRules.allows(access, caller: Caller(uid: 0), owner: 0))
        }
    }
}
