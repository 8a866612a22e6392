// The notifier without a bus: which prompts it shows and where (ShownPrompts: a
// click counts only from the server that showed it, a server that goes shows
// nothing any more, and what still waits is shown by the next), and the session
// bus address it finds in the environment.

import Testing

@testable import LatchkeyNotifications

@Suite("desktop notifications")
struct DesktopNotifierTests {
    static let dunst = ShownPrompts.Notification(id: 7, server: ":1.3")

    /// One prompt, request "r1", until 10 000 ms, shown by `dunst`.
    func oneShown() -> ShownPrompts {
        var prompts = ShownPrompts()
        prompts.add(requestId: "r1", summary: "Sign in to example.com?", body: "Site: example.com", deadline: 10_000)
        prompts.shown(requestId: "r1", as: Self.dunst)
        return prompts
    }

    @Test("a click from the server that shows the notification answers its request, once")
    func click() {
        var prompts = oneShown()
        #expect(
            prompts.receive(.actionInvoked(id: 7, action: "allow", sender: ":1.3"))
                == .init(requestId: "r1", action: "allow")
        )
        #expect(prompts.receive(.actionInvoked(id: 7, action: "allow", sender: ":1.3")) == nil)
        #expect(prompts.remove(requestId: "r1") == nil, "answered: nothing left to close")
    }

    @Test("a signal from another connection, or for another id, answers nothing")
    func strangers() {
        var prompts = oneShown()
        #expect(prompts.receive(.actionInvoked(id: 7, action: "allow", sender: ":1.9")) == nil)
        #expect(prompts.receive(.actionInvoked(id: 8, action: "allow", sender: ":1.3")) == nil)
        #expect(prompts.receive(.notificationClosed(id: 7, sender: ":1.9")) == nil)
        #expect(prompts.remove(requestId: "r1") == Self.dunst, "still shown: withdrawing closes it")
    }

    @Test("a dismissed notification is not shown again; the request ends elsewhere")
    func dismissed() {
        var prompts = oneShown()
        #expect(prompts.receive(.notificationClosed(id: 7, sender: ":1.3")) == nil)
        #expect(prompts.waiting(now: 0).isEmpty)
        #expect(prompts.receive(.serverChanged(old: ":1.3", new: ":1.4")) == nil)
        #expect(prompts.waiting(now: 0).isEmpty)
    }

    @Test("a prompt no server took waits; when its server goes, it waits again; a timed-out one is dropped")
    func waiting() {
        var prompts = oneShown()
        prompts.add(requestId: "r2", summary: "Create a passkey?", body: "", deadline: 5_000)
        #expect(prompts.waiting(now: 0).map(\.requestId) == ["r2"])
        // dunst exits: both wait for the next server, the sooner deadline first
        _ = prompts.receive(.serverChanged(old: ":1.3", new: ""))
        #expect(prompts.waiting(now: 0).map(\.requestId) == ["r2", "r1"])
        #expect(prompts.receive(.actionInvoked(id: 7, action: "allow", sender: ":1.3")) == nil, "a gone server")
        #expect(prompts.waiting(now: 6_000).map(\.requestId) == ["r1"])
        #expect(prompts.remove(requestId: "r2") == nil, "timed out: dropped")
        prompts.shown(requestId: "r1", as: .init(id: 1, server: ":1.5"))
        #expect(
            prompts.receive(.actionInvoked(id: 1, action: "deny", sender: ":1.5"))
                == .init(requestId: "r1", action: "deny")
        )
    }

    @Test("a lost bus connection leaves every prompt waiting")
    func disconnected() {
        var prompts = oneShown()
        prompts.disconnected()
        #expect(prompts.waiting(now: 0).map(\.requestId) == ["r1"])
        #expect(prompts.remove(requestId: "r1") == nil, "nothing shown: nothing to close")
    }

    @Test("the session bus is DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus when it exists")
    func address() {
        #expect(
            DesktopNotifier.sessionBusAddress(["DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus"])
                == "unix:path=/run/user/1000/bus"
        )
        #expect(DesktopNotifier.sessionBusAddress(["XDG_RUNTIME_DIR": "/nonexistent"]) == nil)
        #expect(DesktopNotifier.sessionBusAddress([:]) == nil)
        #expect(DesktopNotifier.escapeAddressValue("/run/user/1000/bus") == "/run/user/1000/bus")
        #expect(DesktopNotifier.escapeAddressValue("/tmp/a b,c=d;é") == "/tmp/a%20b%2Cc%3Dd%3B%C3%A9")
    }

    @Test("the bus's answers that no server owns the name and none could be started mean no server")
    func noServer() {
        #expect(SessionBus.meansNoServer("org.freedesktop.DBus.Error.ServiceUnknown"))
        #expect(SessionBus.meansNoServer("org.freedesktop.DBus.Error.Spawn.ChildSignaled"))
        #expect(!SessionBus.meansNoServer("org.freedesktop.DBus.Error.NoReply"))
        #expect(!SessionBus.meansNoServer("org.freedesktop.Notifications.Error.Failed"))
    }

    @Test("without a session bus the notifier is off and says why")
    func unavailable() {
        let notifier = DesktopNotifier(environment: [:], logger: .init(label: "test"))
        #expect(!notifier.isAvailable)
        #expect(notifier.unavailableReason == "no session D-Bus")
        notifier.show(
            requestId: "r1",
            text: PromptText(conditionalRegistration: "k", rpId: "example.com", userName: "u"),
            actions: false,
            timeoutMilliseconds: 1000
        )
        notifier.shutdown()
    }
}
