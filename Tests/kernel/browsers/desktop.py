#!/usr/bin/env python3
"""A login user's Chromium for the desktop suite (Tests/kernel/desktop-checks.sh):
Chromium and chromedriver started as that user, on that user's own X display
(LK_CHROMIUM_DISPLAY), registering and signing in on a page on http://localhost, every
result verified by python-fido2's Fido2Server.

    desktop.py --browser-log FILE --work DIR [--timeout-ms 60000]

Runs as a coprocess of desktop-checks.sh, as the user (not root). Prints
"READY DEVTOOLS_PORT CHROMEDRIVER_PORT" once the browser is up (or "DONE start" when
it is not), then reads commands on stdin, one a line:

    create LABEL NAME...       register a credential (non-discoverable, user
                               verification discouraged: the keys have no PIN) and
                               keep it as LABEL; the check is NAME
    get LABEL NAME...          sign in with LABEL's credential (allowCredentials [it])
    begin-get LABEL            start that sign-in and answer "STARTED" at once (or a FAIL line
                               and "DONE")
    end-get LABEL SECONDS NAME...  wait up to SECONDS for the sign-in begin-get started
A NAME that starts with "#" is no check: its outcome is a "#" line.
    quit                       (or end of input) closes the browser

Each check is a PASS/FAIL line (common.py's format), then "DONE". Details go to stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from fido2.utils import websafe_decode
from fido2.webauthn import (
    AuthenticatorAttachment,
    AuthenticatorData,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # Tests/kernel: rp.py

import rp  # noqa: E402
from chromium import Chromium  # noqa: E402
from common import fail_line, log, open_page, run_step, say  # noqa: E402

RP_ID = "localhost"
DISCOURAGED = UserVerificationRequirement.DISCOURAGED


class Desk:
    """The credentials this browser registered, and the sign-in it has started."""

    def __init__(self, browser: Chromium):
        self.browser = browser
        self.server = rp.make_server(RP_ID, "latchkey desktop suite")
        self.credentials = {}  # label -> AttestedCredentialData
        self.counters = {}  # label -> last signature counter
        self.pending = None  # (label, state, started) of begin-get

    def check(self, name: str, fn) -> None:
        if name.startswith("#"):  # not a check (a step that only cleans up): its outcome as a note
            try:
                say(f"{name}: {fn()}")
            except Exception as e:  # noqa: BLE001
                say(f"{name}: {type(e).__name__}: {str(e)[:300]}")
            return
        passed, detail, seconds = run_step(name, fn, lambda: self.browser.log.since(self.mark))
        if passed:
            say(f"PASS\t{name} ({seconds:.1f} s: {detail})")

    def public_key(self, options) -> dict:
        public_key = dict(options)["publicKey"]
        public_key["timeout"] = self.browser.args.timeout_ms
        self.mark = self.browser.log.mark()  # a failing check shows the browser's log since
        return public_key

    def create(self, label: str) -> str:
        options, state = self.server.register_begin(
            rp.new_user(f"desktop-{label}"), resident_key_requirement=ResidentKeyRequirement.DISCOURAGED,
            user_verification=DISCOURAGED, authenticator_attachment=AuthenticatorAttachment.CROSS_PLATFORM)
        result = self.browser.request(self.public_key(options), "create", None)
        auth_data = self.server.register_complete(state, result["credential"])
        assert auth_data.is_user_present(), "UP is not set"
        self.credentials[label] = auth_data.credential_data
        self.counters[label] = auth_data.counter
        aaguid = bytes(auth_data.credential_data.aaguid).hex()
        return f"{result['ms']} ms in the page, attestation verified, aaguid {aaguid}"

    def begin_get(self, label: str) -> None:
        options, state = self.server.authenticate_begin([self.credentials[label]], user_verification=DISCOURAGED)
        mark = self.browser.begin(self.public_key(options), "get", None)
        self.pending = (label, state, mark, time.monotonic())

    def end_get(self, seconds: float) -> str:
        label, state, mark, started = self.pending
        self.pending = None
        result = self.browser.outcome("get", None, mark, started + seconds)
        self.server.authenticate_complete(state, [self.credentials[label]], result["credential"])
        auth_data = AuthenticatorData(websafe_decode(result["credential"]["response"]["authenticatorData"]))
        assert auth_data.is_user_present(), "UP is not set"
        before, self.counters[label] = self.counters[label], auth_data.counter
        assert auth_data.counter > before, f"sign count {auth_data.counter} is not above {before}"
        return f"{result['ms']} ms in the page, signature verified, sign count {before} -> {auth_data.counter}"

    def get(self, label: str) -> str:
        self.begin_get(label)
        return self.end_get(self.browser.args.timeout_ms / 1000 + 20)

    def command(self, words: list[str]) -> None:
        verb, label, rest = words[0], words[1], words[2:]
        name = " ".join(rest[1:] if verb == "end-get" else rest) or f"{verb} {label}"
        if label not in self.credentials and verb != "create":
            fail_line(name, f"prerequisite failed: no credential {label!r} was registered")
        elif verb == "create":
            self.check(name, lambda: self.create(label))
        elif verb == "get":
            self.check(name, lambda: self.get(label))
        elif verb == "begin-get":
            try:
                self.begin_get(label)
                say("STARTED")  # (and no DONE: end-get ends it)
                return
            except Exception as e:  # noqa: BLE001 - reported as the sign-in's failure
                fail_line(f"{label}: the sign-in starts in the page", e)
        elif verb == "end-get" and rest:
            if self.pending is None:
                fail_line(name, "no sign-in was started")
            else:
                self.check(name, lambda: self.end_get(float(rest[0])))
        else:
            log(f"unknown command {' '.join(words)!r}")
        say("DONE")


def main() -> int:
    args, http, url, browser = open_page(argparse.ArgumentParser(), Chromium)
    desk = Desk(browser)
    name = f"{os.environ.get('USER') or os.getuid()}'s Chromium up on {browser.display}, page {url}"
    started = False
    try:
        t0 = time.monotonic()
        browser.start()
        say(f"PASS\t{name} ({time.monotonic() - t0:.1f} s)")
        started = True
    except Exception as e:  # noqa: BLE001
        fail_line(name, e)
    say(f"READY {browser.devtools} {browser.driver_port}" if started else "DONE start")
    try:
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] == "quit":
                break
            if len(words) < 2 or not started:
                fail_line(" ".join(words[2:]) or words[0], "the browser is not up")
                say("DONE")
                continue
            desk.command(words)
    finally:
        browser.close()
        http.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
