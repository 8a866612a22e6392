// The state of one attached virtual FIDO USB device — configuration, endpoint halts, HID
// idle rate — and its answers to control transfers on the default pipe: the standard
// requests of USB 2.0 §9.4 and the HID class requests of HID 1.11 §7.2. Anything else
// stalls (§9.2.7 "Request Error").

/// How the device ends a control transfer.
public enum ControlTransferResult: Hashable, Sendable {
    /// A request error: the device returns STALL (USB 2.0 §9.2.7); USB/IP reports -EPIPE.
    case stall
    /// The request succeeded with this data stage, already cut to wLength (device-to-host);
    /// empty for a request with no data stage.
    case dataIn([UInt8])
    /// The request succeeded; a host-to-device data stage, if any, was taken whole.
    case acknowledged
    /// SET_REPORT(Output) succeeded: the report, 64 bytes, goes to the key like one written to
    /// the interrupt OUT endpoint.
    case outputReport([UInt8])
}

/// The mutable state of an attached ``FIDOUSBDevice`` and its control-request handling.
///
/// A device exported over USB/IP is already configured, as one bound to Linux's usbip-host
/// is, so the state starts in configuration 1; the host may set it again, or unset it with
/// SET_CONFIGURATION(0). In the Address state (configuration 0) interface and endpoint-1
/// requests stall (USB 2.0 §9.4).
///
/// Decisions where the specifications leave room:
/// - GET_REPORT(Input) returns a zeroed 64-byte report, never a queued one: taking a report
///   through the control pipe would reorder the CTAPHID packets the interrupt pipe carries.
///   GET_REPORT of an Output or Feature report stalls (the device has no Feature reports).
/// - SET_REPORT(Output, ID 0) with 1–64 bytes is an output report like one on endpoint 0x01,
///   zero-padded to 64 bytes; other SET_REPORTs stall.
/// - SET_IDLE records the rate GET_IDLE returns, but the device never repeats a report: a
///   FIDO key reports only when it has something to say, and a repeated CTAPHID packet would
///   corrupt a message. Only report ID 0 exists (the descriptor has no report IDs).
/// - GET_PROTOCOL returns 1 (report protocol); SET_PROTOCOL(1) is acknowledged and
///   SET_PROTOCOL(0), boot protocol, stalls: this is not a boot device (HID 1.11 §7.2.5).
/// - SET_ADDRESS is acknowledged and ignored: vhci-hcd handles addressing itself, and a
///   USB/IP device has no bus address to change.
/// - DEVICE_REMOTE_WAKEUP and TEST_MODE stall: bmAttributes does not offer remote wakeup and
///   a full-speed device has no test modes; GET_DESCRIPTOR(DEVICE_QUALIFIER) stalls, as a
///   full-speed-only device must (USB 2.0 §9.6.2).
public struct FIDOUSBDeviceState: Hashable, Sendable {
    /// The device this state belongs to.
    public let device: FIDOUSBDevice
    /// The current configuration: 1, or 0 in the Address state.
    public private(set) var configurationValue: UInt8 = FIDOUSBDevice.configurationValue
    /// Whether the interrupt IN endpoint (0x81) is halted.
    public private(set) var isInEndpointHalted = false
    /// Whether the interrupt OUT endpoint (0x01) is halted.
    public private(set) var isOutEndpointHalted = false
    /// The idle rate SET_IDLE set, in 4 ms units (HID 1.11 §7.2.4); 0, indefinite, at first.
    public private(set) var idleRate: UInt8 = 0

    /// A freshly attached, configured device.
    public init(device: FIDOUSBDevice) {
        self.device = device
    }

    /// Whether the device is in the Configured state.
    public var isConfigured: Bool { configurationValue != 0 }

    /// Whether an interrupt IN transfer can complete now.
    public var canSendInputReport: Bool { isConfigured && !isInEndpointHalted }

    /// Whether an interrupt OUT transfer can be taken now.
    public var canReceiveOutputReport: Bool { isConfigured && !isOutEndpointHalted }

    /// Answers one control transfer. `data` is the host-to-device data stage (empty for a
    /// device-to-host request); the answer's data stage is cut to `setup.wLength`.
    public mutating func handleControlTransfer(_ setup: USBSetupPacket, data: [UInt8] = []) -> ControlTransferResult {
        let result: ControlTransferResult
        switch setup.bmRequestType & 0x60 {
        case 0x00: result = handleStandardRequest(setup)
        case 0x20: result = handleHIDClassRequest(setup, data: data)
        default: result = .stall  // vendor and reserved types
        }
        if case .dataIn(let bytes) = result {
            return .dataIn(Array(bytes.prefix(Int(setup.wLength))))
        }
        return result
    }

    /// Whether `address` names one of the interrupt endpoints.
    private func isInterruptEndpoint(_ address: UInt16) -> Bool {
        address == UInt16(FIDOUSBDevice.inEndpointAddress) || address == UInt16(FIDOUSBDevice.outEndpointAddress)
    }

    /// Whether `address` names the default control pipe, in either direction.
    private func isControlEndpoint(_ address: UInt16) -> Bool {
        address == 0x00 || address == 0x80
    }

    private mutating func handleStandardRequest(_ setup: USBSetupPacket) -> ControlTransferResult {
        switch (setup.bmRequestType, setup.bRequest) {
        case (USBRequestType.standardInDevice, USBStandardRequest.getDescriptor):
            return deviceDescriptor(setup)
        case (USBRequestType.standardInInterface, USBStandardRequest.getDescriptor):
            return interfaceDescriptor(setup)

        case (USBRequestType.standardInDevice, USBStandardRequest.getStatus):
            // Bus-powered, no remote wakeup (USB 2.0 §9.4.5, Figure 9-4).
            return setup.wValue == 0 && setup.wIndex == 0 ? .dataIn([0, 0]) : .stall
        case (USBRequestType.standardInInterface, USBStandardRequest.getStatus):
            return setup.wValue == 0 && setup.wIndex == UInt16(FIDOUSBDevice.interfaceNumber) && isConfigured
                ? .dataIn([0, 0]) : .stall
        case (USBRequestType.standardInEndpoint, USBStandardRequest.getStatus):
            guard setup.wValue == 0 else { return .stall }
            if isControlEndpoint(setup.wIndex) { return .dataIn([0, 0]) }
            guard isConfigured else { return .stall }
            switch setup.wIndex {
            case UInt16(FIDOUSBDevice.inEndpointAddress): return .dataIn([isInEndpointHalted ? 1 : 0, 0])
            case UInt16(FIDOUSBDevice.outEndpointAddress): return .dataIn([isOutEndpointHalted ? 1 : 0, 0])
            default: return .stall
            }

        case (USBRequestType.standardOutEndpoint, USBStandardRequest.clearFeature),
            (USBRequestType.standardOutEndpoint, USBStandardRequest.setFeature):
            return endpointHalt(setup, halt: setup.bRequest == USBStandardRequest.setFeature)

        case (USBRequestType.standardOutDevice, USBStandardRequest.setAddress):
            return setup.wValue <= 127 && setup.wIndex == 0 && setup.wLength == 0 ? .acknowledged : .stall

        case (USBRequestType.standardInDevice, USBStandardRequest.getConfiguration):
            return .dataIn([configurationValue])
        case (USBRequestType.standardOutDevice, USBStandardRequest.setConfiguration):
            // Either value resets the interface's endpoints (USB 2.0 §9.1.1.5, §9.4.5).
            guard setup.wValue == 0 || setup.wValue == UInt16(FIDOUSBDevice.configurationValue) else { return .stall }
            configurationValue = UInt8(setup.wValue)
            isInEndpointHalted = false
            isOutEndpointHalted = false
            return .acknowledged

        case (USBRequestType.standardInInterface, USBStandardRequest.getInterface):
            return isConfigured && setup.wIndex == UInt16(FIDOUSBDevice.interfaceNumber) ? .dataIn([0]) : .stall
        case (USBRequestType.standardOutInterface, USBStandardRequest.setInterface):
            // Only alternate setting 0 exists; selecting it resets its endpoints (§9.4.10).
            guard isConfigured, setup.wIndex == UInt16(FIDOUSBDevice.interfaceNumber), setup.wValue == 0 else {
                return .stall
            }
            isInEndpointHalted = false
            isOutEndpointHalted = false
            return .acknowledged

        default:
            // Among others: CLEAR_FEATURE/SET_FEATURE for the device (remote wakeup, test
            // mode), SET_DESCRIPTOR, SYNCH_FRAME (no isochronous endpoint).
            return .stall
        }
    }

    /// GET_DESCRIPTOR to the device: DEVICE, CONFIGURATION (index 0) and STRING.
    private func deviceDescriptor(_ setup: USBSetupPacket) -> ControlTransferResult {
        let type = UInt8(setup.wValue >> 8)
        let index = UInt8(truncatingIfNeeded: setup.wValue)
        switch type {
        case USBDescriptorType.device where index == 0:
            return .dataIn(device.deviceDescriptor)
        case USBDescriptorType.configuration where index == 0:
            return .dataIn(device.configurationDescriptor)
        case USBDescriptorType.string:
            return device.stringDescriptor(index: index).map(ControlTransferResult.dataIn) ?? .stall
        default:
            return .stall
        }
    }

    /// GET_DESCRIPTOR to the interface: the HID class descriptors (HID 1.11 §7.1.1).
    private func interfaceDescriptor(_ setup: USBSetupPacket) -> ControlTransferResult {
        guard setup.wIndex == UInt16(FIDOUSBDevice.interfaceNumber), setup.wValue & 0xFF == 0 else { return .stall }
        switch UInt8(setup.wValue >> 8) {
        case USBDescriptorType.hid: return .dataIn(device.hidDescriptor)
        case USBDescriptorType.report: return .dataIn(device.reportDescriptor)
        default: return .stall
        }
    }

    /// CLEAR_FEATURE / SET_FEATURE(ENDPOINT_HALT) (USB 2.0 §9.4.1, §9.4.9). The default pipe
    /// does not implement Halt: clearing it is acknowledged, setting it stalls.
    private mutating func endpointHalt(_ setup: USBSetupPacket, halt: Bool) -> ControlTransferResult {
        guard setup.wValue == USBFeatureSelector.endpointHalt, setup.wLength == 0 else { return .stall }
        if isControlEndpoint(setup.wIndex) { return halt ? .stall : .acknowledged }
        guard isConfigured, isInterruptEndpoint(setup.wIndex) else { return .stall }
        if setup.wIndex == UInt16(FIDOUSBDevice.inEndpointAddress) {
            isInEndpointHalted = halt
        } else {
            isOutEndpointHalted = halt
        }
        return .acknowledged
    }

    /// The HID class requests (HID 1.11 §7.2), all addressed to interface 0.
    private mutating func handleHIDClassRequest(_ setup: USBSetupPacket, data: [UInt8]) -> ControlTransferResult {
        guard isConfigured, setup.wIndex == UInt16(FIDOUSBDevice.interfaceNumber) else { return .stall }
        let high = UInt8(setup.wValue >> 8)
        let reportID = UInt8(truncatingIfNeeded: setup.wValue)
        switch (setup.bmRequestType, setup.bRequest) {
        case (USBRequestType.classInInterface, HIDClassRequest.getReport):
            guard high == HIDReportType.input, reportID == 0 else { return .stall }
            return .dataIn([UInt8](repeating: 0, count: FIDOUSBDevice.reportSize))
        case (USBRequestType.classOutInterface, HIDClassRequest.setReport):
            guard high == HIDReportType.output, reportID == 0,
                (1...FIDOUSBDevice.reportSize).contains(data.count)
            else { return .stall }
            return .outputReport(data + [UInt8](repeating: 0, count: FIDOUSBDevice.reportSize - data.count))
        case (USBRequestType.classInInterface, HIDClassRequest.getIdle):
            return high == 0 && reportID == 0 ? .dataIn([idleRate]) : .stall
        case (USBRequestType.classOutInterface, HIDClassRequest.setIdle):
            guard reportID == 0 else { return .stall }
            idleRate = high
            return .acknowledged
        case (USBRequestType.classInInterface, HIDClassRequest.getProtocol):
            return setup.wValue == 0 ? .dataIn([1]) : .stall
        case (USBRequestType.classOutInterface, HIDClassRequest.setProtocol):
            return setup.wValue == 1 ? .acknowledged : .stall
        default:
            return .stall
        }
    }
}
