// What the notifier reads from gdbus and writes to it: monitor lines,
// Notify's and GetCapabilities' answers, and GVariant string literals.

import Testing

@testable import LatchkeyNotifications

@Suite("desktop notifications")
struct DesktopNotifierTests {
    @Test("gdbus monitor lines become actions and closes")
    func parse() {
        let path = "/org/freedesktop/Notifications: org.freedesktop.Notifications."
        #expect(
            DesktopNotifier.parseSignal(path + "ActionInvoked (uint32 7, 'allow')")
                == .init(id: 7, kind: .action("allow"))
        )
        #expect(
            DesktopNotifier.parseSignal(path + "NotificationClosed (uint32 7, uint32 2)") == .init(id: 7, kind: .closed)
        )
        #expect(DesktopNotifier.parseSignal("The name org.freedesktop.Notifications is owned by :1.0") == nil)
        #expect(DesktopNotifier.parseSignal(path + "ActionInvoked (uint32 x, 'allow')") == nil)
        #expect(DesktopNotifier.parseNotificationId("(uint32 12,)\n") == 12)
        #expect(DesktopNotifier.parseNotificationId("()") == nil)
    }

    @Test("GetCapabilities' answer lists the server's capabilities")
    func capabilities() {
        #expect(
            DesktopNotifier.parseCapabilities("(['actions', 'body', 'body-markup'],)\n") == [
                "actions", "body", "body-markup",
            ]
        )
        #expect(DesktopNotifier.parseCapabilities("(@as [],)\n") == [])
    }

    @Test("text becomes a GVariant string literal that cannot break out; our line breaks stay line breaks")
    func literal() {
        #expect(DesktopNotifier.literal("alice's \\ key\n\tend\u{7F}") == "'alice\\'s \\\\ key\\n end '")
    }
}
