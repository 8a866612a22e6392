// sd-bus, libsystemd's D-Bus client: the desktop notifier's one connection to the
// session bus (Sources/LatchkeyNotifications/SessionBus.swift). Only that file
// imports this module.
#ifndef CSYSTEMDBUS_H
#define CSYSTEMDBUS_H

#include <systemd/sd-bus.h>

#endif
