// Who a discoverable credential is for — the relying party (ID, hash, name)
// and the user (handle, name, display name) — as one value sealed under the
// store's data key (schema v4), so that a copy of the store without the key
// names no site and no account. Rows are found by keyed hashes instead
// (DataKeys). The encoding is padded to a multiple of 32 bytes so that the
// sealed length says little about the names' lengths.

import CTAP

/// The naming fields of a `StoredCredential`, encoded for sealing.
struct AccountRecord: Equatable {
    var rpId: String
    var rpIdHash: [UInt8]
    var rpName: String?
    var userId: [UInt8]
    var userName: String?
    var userDisplayName: String?

    static let version: UInt8 = 1
    static let padding = 32
}

extension AccountRecord {
    init(_ credential: StoredCredential) {
        self.init(
            rpId: credential.rpId, rpIdHash: credential.rpIdHash, rpName: credential.rpName,
            userId: credential.userId, userName: credential.userName, userDisplayName: credential.userDisplayName
        )
    }

    /// version (1) || each field as present (1) + length (4, big-endian) +
    /// bytes, in declaration order || zeros to a multiple of 32.
    var encoded: [UInt8] {
        var bytes: [UInt8] = [Self.version]
        func field(_ value: [UInt8]?) {
            guard let value else {
                bytes.append(0)
                return
            }
            bytes.append(1)
            let count = UInt32(value.count)
            bytes += [UInt8(count >> 24), UInt8(truncatingIfNeeded: count >> 16), UInt8(truncatingIfNeeded: count >> 8),
                      UInt8(truncatingIfNeeded: count)]
            bytes += value
        }
        field(Array(rpId.utf8))
        field(rpIdHash)
        field(rpName.map { Array($0.utf8) })
        field(userId)
        field(userName.map { Array($0.utf8) })
        field(userDisplayName.map { Array($0.utf8) })
        let remainder = bytes.count % Self.padding
        if remainder != 0 { bytes += [UInt8](repeating: 0, count: Self.padding - remainder) }
        return bytes
    }

    /// Decodes `encoded`; anything else (another version, a field cut short,
    /// text that is not UTF-8, padding that is not zeros) is `.corrupt`.
    init(decoding bytes: [UInt8], what: String) throws(StoreError) {
        var reader = Reader(bytes: bytes)
        let corrupt = StoreError(.corrupt, "\(what) is not an account record")
        guard reader.byte() == Self.version else { throw corrupt }
        guard case .some(.some(let rpId)) = reader.field(), let rpIdText = String(validating: rpId, as: UTF8.self),
            case .some(.some(let rpIdHash)) = reader.field(),
            case .some(let rpName) = reader.field(),
            case .some(.some(let userId)) = reader.field(),
            case .some(let userName) = reader.field(),
            case .some(let userDisplayName) = reader.field()
        else { throw corrupt }
        func text(_ value: [UInt8]?) throws(StoreError) -> String? {
            guard let value else { return nil }
            guard let text = String(validating: value, as: UTF8.self) else { throw corrupt }
            return text
        }
        guard reader.rest.allSatisfy({ $0 == 0 }) else { throw corrupt }
        self.init(
            rpId: rpIdText, rpIdHash: rpIdHash, rpName: try text(rpName), userId: userId,
            userName: try text(userName), userDisplayName: try text(userDisplayName)
        )
    }

    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        mutating func byte() -> UInt8? {
            guard offset < bytes.count else { return nil }
            defer { offset += 1 }
            return bytes[offset]
        }

        /// nil: cut short or malformed; .some(nil): an absent field.
        mutating func field() -> [UInt8]?? {
            guard let present = byte() else { return nil }
            if present == 0 { return .some(nil) }
            guard present == 1, bytes.count - offset >= 4 else { return nil }
            let count = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            offset += 4
            guard bytes.count - offset >= count else { return nil }
            defer { offset += count }
            return .some(Array(bytes[offset..<offset + count]))
        }

        var rest: ArraySlice<UInt8> { bytes[offset...] }
    }
}
