"""A fake desktop notification server for the tests: org.freedesktop.Notifications on
the session bus given by DBUS_SESSION_BUS_ADDRESS (a private dbus-daemon of the test).

It prints one JSON line per call it receives (Notify, CloseNotification) on standard
output, after a first line READY, and offers org.latchkey.Test.Invoke(id, action), which
emits ActionInvoked(id, action) and then NotificationClosed(id, 2), as a server does
when a person clicks an action. Like Debian's dunst, it sends ActionInvoked and
NotificationClosed only to the connection that called Notify for that notification (a
unicast signal: the Desktop Notifications Specification has the signals go to the
client that made the notification), never to the whole bus, so that a client which
notifies on one connection and listens on another hears nothing here either. It says it
renders body markup (GetCapabilities: actions, body, body-markup), as desktop servers
do. It needs PyGObject (Debian python3-gi) and ends by itself when the bus goes away, on
SIGTERM, or after --max-seconds.

    python3 fake_notifications.py [--max-seconds 300]
"""

import json
import signal
import sys

from gi.repository import Gio, GLib

XML = """
<node>
  <interface name="org.freedesktop.Notifications">
    <method name="Notify">
      <arg type="s" direction="in"/><arg type="u" direction="in"/><arg type="s" direction="in"/>
      <arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="as" direction="in"/>
      <arg type="a{sv}" direction="in"/><arg type="i" direction="in"/><arg type="u" direction="out"/>
    </method>
    <method name="CloseNotification"><arg type="u" direction="in"/></method>
    <method name="GetCapabilities"><arg type="as" direction="out"/></method>
    <method name="GetServerInformation">
      <arg type="s" direction="out"/><arg type="s" direction="out"/>
      <arg type="s" direction="out"/><arg type="s" direction="out"/>
    </method>
    <signal name="ActionInvoked"><arg type="u"/><arg type="s"/></signal>
    <signal name="NotificationClosed"><arg type="u"/><arg type="u"/></signal>
  </interface>
  <interface name="org.latchkey.Test">
    <method name="Invoke"><arg type="u" direction="in"/><arg type="s" direction="in"/></method>
  </interface>
</node>
"""
PATH = "/org/freedesktop/Notifications"
IFACE = "org.freedesktop.Notifications"


def main() -> None:
    max_seconds = int(sys.argv[sys.argv.index("--max-seconds") + 1]) if "--max-seconds" in sys.argv else 300
    loop = GLib.MainLoop()
    node = Gio.DBusNodeInfo.new_for_xml(XML)
    # notification id -> the unique bus name of the connection that called Notify for it
    state = {"next": 1, "open": {}}

    def record(**fields):
        print(json.dumps(fields), flush=True)

    def emit(connection, nid, name, params):
        """The signal to the connection that made notification `nid`, and to nobody else."""
        connection.emit_signal(state["open"][nid], PATH, IFACE, name, params)

    def on_call(connection, sender, path, interface, method, params, invocation):
        args = params.unpack()
        if method == "Notify":
            app, replaces, icon, summary, body, actions, hints, timeout = args
            nid = replaces or state["next"]
            state["next"] += 1
            state["open"][nid] = sender
            record(call="Notify", id=nid, app=app, summary=summary, body=body, actions=list(actions),
                   timeout=timeout, sender=sender)
            invocation.return_value(GLib.Variant("(u)", (nid,)))
        elif method == "CloseNotification":
            (nid,) = args
            record(call="CloseNotification", id=nid)
            if nid in state["open"]:
                emit(connection, nid, "NotificationClosed", GLib.Variant("(uu)", (nid, 3)))
                del state["open"][nid]
            invocation.return_value(None)
        elif method == "GetCapabilities":
            invocation.return_value(GLib.Variant("(as)", (["actions", "body", "body-markup"],)))
        elif method == "GetServerInformation":
            invocation.return_value(GLib.Variant("(ssss)", ("fake", "latchkey-tests", "1", "1.2")))
        elif method == "Invoke":
            nid, action = args
            record(call="Invoke", id=nid, action=action)
            if nid not in state["open"]:
                invocation.return_dbus_error("org.latchkey.Test.Error.NoSuchNotification",
                                             f"notification {nid} is not open")
                return
            emit(connection, nid, "ActionInvoked", GLib.Variant("(us)", (nid, action)))
            emit(connection, nid, "NotificationClosed", GLib.Variant("(uu)", (nid, 2)))
            del state["open"][nid]
            invocation.return_value(None)

    def on_bus(connection, name):
        for interface in node.interfaces:
            connection.register_object(PATH, interface, on_call, None, None)
        connection.connect("closed", lambda *a: loop.quit())

    def on_name(connection, name):
        print("READY", flush=True)

    def on_lost(connection, name):
        loop.quit()

    Gio.bus_own_name(Gio.BusType.SESSION, IFACE, Gio.BusNameOwnerFlags.NONE, on_bus, on_name, on_lost)
    GLib.timeout_add_seconds(max_seconds, loop.quit)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, loop.quit)
    loop.run()


if __name__ == "__main__":
    main()
