// The one boundary where local errors become wire statuses (docs/CONTRIBUTING.md:
// one mapping per layer). Internal detail stays in the error for the log; the host
// sees only the status.

import CBOR
import LatchkeyCrypto

extension CTAPStatus {
    /// The status for a CBOR failure while reading a request (CTAP 2.1 §8.2):
    /// a wrong type is CTAP2_ERR_CBOR_UNEXPECTED_TYPE, a missing key
    /// CTAP2_ERR_MISSING_PARAMETER, anything not well-formed or not canonical
    /// CTAP2_ERR_INVALID_CBOR.
    init(_ error: CBORError) {
        switch error.code {
        case .unexpectedType, .outOfRange: self = .cborUnexpectedType
        case .missingField: self = .missingParameter
        default: self = .invalidCBOR
        }
    }

    /// The status for a store failure: a full disk is CTAP2_ERR_KEY_STORE_FULL,
    /// anything else CTAP1_ERR_OTHER.
    init(_ error: StoreError) {
        self = error.code == .full ? .keyStoreFull : .other
    }

    /// The status for a crypto failure inside the authenticator: CTAP1_ERR_OTHER.
    init(_ error: CryptoError) {
        self = .other
    }

    /// The status for a PIN/UV auth protocol failure where the spec gives no
    /// step-specific one: a platform key that is not a P-256 point (and any
    /// other malformed input) is CTAP1_ERR_INVALID_PARAMETER (CTAP 2.1
    /// §6.5.5.5 step 4: "If an error results, return CTAP1_ERR_INVALID_PARAMETER").
    init(_ error: PinUvAuthError) {
        self = error.code == .crypto ? .other : .invalidParameter
    }
}

/// Runs a CBOR read and maps its failure to a CTAP status.
@inline(__always)
func reading<T>(_ body: () throws(CBORError) -> T) throws(CTAPStatus) -> T {
    do {
        return try body()
    } catch {
        throw CTAPStatus(error)
    }
}
