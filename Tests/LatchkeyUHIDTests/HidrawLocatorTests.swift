// HidrawLocator on a machine without uhid: it must find nothing, quickly,
// without crashing, and give up waiting at its timeout.

@testable import LatchkeyUHID
import Testing

@Suite("Finding the hidraw node", .timeLimit(.minutes(1)))
struct HidrawLocatorTests {
    /// A uniq no device on any machine has.
    static let match = HidrawMatch(uniq: "latchkey-no-such-key-7f3a9c", name: "latchkey nowhere")

    @Test("find returns nil when no hidraw device has our HID_UNIQ")
    func findsNothing() throws {
        #expect(try HidrawLocator.find(Self.match) == nil)
    }

    @Test("wait gives up at its timeout, promptly")
    func waitTimesOut() async throws {
        let started = ContinuousClock.now
        let node = try await HidrawLocator.wait(for: Self.match, timeout: .milliseconds(200))
        let elapsed = ContinuousClock.now - started
        #expect(node == nil)
        #expect(elapsed >= .milliseconds(200))
        #expect(elapsed < .seconds(2))
    }

    @Test("wait with a zero timeout looks once")
    func zeroTimeout() async throws {
        #expect(try await HidrawLocator.wait(for: Self.match, timeout: .zero) == nil)
    }

    @Test("waiting for a configuration's node matches its uniq, name and phys")
    func configurationMatch() async throws {
        let configuration = testConfiguration(uniq: "latchkey-no-such-key-0b1d")
        #expect(
            HidrawMatch(configuration: configuration)
                == HidrawMatch(uniq: "latchkey-no-such-key-0b1d", name: "latchkey test key", phys: "latchkey/test")
        )
        var unnamed = configuration
        unnamed.phys = ""
        #expect(HidrawMatch(configuration: unnamed).phys == nil)
        #expect(try await HidrawLocator.wait(for: configuration, timeout: .milliseconds(100)) == nil)
    }

    @Test("a cancelled wait throws cancelled")
    func cancelled() async {
        let task = Task { try await HidrawLocator.wait(for: Self.match, timeout: .seconds(30)) }
        try? await Task.sleep(for: .milliseconds(100))
        task.cancel()
        let started = ContinuousClock.now
        let result = await task.result
        #expect(ContinuousClock.now - started < .seconds(2))
        #expect(throws: UHIDError(.cancelled, "")) { try result.get() }
    }

    @Test("a match compares each given property exactly; a missing property is the empty string")
    func matching() {
        let properties = ["HID_UNIQ": "abc", "HID_NAME": "latchkey test key", "HID_PHYS": ""]
        let lookUp = { (key: String) in properties[key] }
        #expect(HidrawMatch(uniq: "abc").matches(lookUp))
        #expect(HidrawMatch(uniq: "abc", name: "latchkey test key", phys: "").matches(lookUp))
        #expect(HidrawMatch().matches(lookUp))
        #expect(!HidrawMatch(uniq: "ab").matches(lookUp))
        #expect(!HidrawMatch(uniq: "abc", name: "other").matches(lookUp))
        #expect(!HidrawMatch(phys: "x").matches(lookUp))
        #expect(HidrawMatch(uniq: "").matches { _ in nil })
    }

    @Test("the libudev wrappers read a real device: /dev/null in subsystem mem, which has no hid parent")
    func udevWrappers() throws {
        let context = try UdevContext()
        let paths = try UdevEnumeration(context: context, subsystem: "mem").scan()
        let null = try #require(paths.first { $0.hasSuffix("/null") })
        let device = try #require(UdevDevice(context: context, syspath: null))
        #expect(device.devnode == "/dev/null")
        #expect(device.property("MAJOR") == "1")
        #expect(device.property("HID_UNIQ") == nil)
        #expect(device.parent(subsystem: "hid") == nil)
        #expect(UdevDevice(context: context, syspath: "/sys/devices/latchkey-no-such-device") == nil)
        #expect(try UdevEnumeration(context: context, subsystem: "latchkey-no-such-subsystem").scan() == [])
    }
}
