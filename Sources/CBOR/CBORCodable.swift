// The two protocols every CTAP wire type conforms to (docs/CONTRIBUTING.md,
// "Wire types"): a value read from one decoded data item, and a value written
// as one. With them, what reads or writes any such value (the entities of a
// list, a command's parameters, a response after its status) is written once,
// here or at the engine's one dispatch, instead of once per type.

/// A value read from one decoded CBOR data item: the CTAP requests, the
/// WebAuthn entities they carry and the extension inputs.
///
/// Reading is strict in types and lenient in content, as CTAP asks: a member
/// of the wrong type throws `.unexpectedType`, an absent required member
/// `.missingField`, unknown members are ignored. What a value means (a
/// length, a subcommand latchkey lacks) is the command's check, made in the
/// spec's order, not the decoder's.
public protocol CBORDecodable {
    /// Reads the value from `cbor`.
    init(cbor: CBORValue) throws(CBORError)
}

/// A value written as one CBOR data item: the CTAP responses and the
/// entities they carry.
public protocol CBOREncodable {
    /// The value as a data item (a map, for every CTAP type).
    var cbor: CBORValue { get }
}

extension CBORDecodable {
    /// Decodes `bytes`, which must hold exactly one strict CTAP2 canonical
    /// data item, and reads the value from it.
    public init(decoding bytes: [UInt8]) throws(CBORError) {
        try self.init(cbor: CBORDecoder().decode(bytes))
    }
}

extension CBORValue {
    /// The value read as `Value`.
    public func decoded<Value: CBORDecodable>(as _: Value.Type = Value.self) throws(CBORError) -> Value {
        try Value(cbor: self)
    }

    /// The value as an array whose every element reads as `Element`.
    public func arrayValue<Element: CBORDecodable>(
        of _: Element.Type,
        _ what: @autoclosure () -> String = "value"
    ) throws(CBORError) -> [Element] {
        var elements: [Element] = []
        for item in try arrayValue(what()) {
            elements.append(try Element(cbor: item))
        }
        return elements
    }
}
