#!/usr/bin/env python3
"""Selenium through latchkey-webdriver, with the real Chromium: a virtual authenticator
test written as Selenium's documentation writes one (VirtualAuthenticatorOptions,
add_virtual_authenticator, Credential.create_resident_credential, add_credential,
get_credentials, remove_credential, remove_all_credentials, set_user_verified,
remove_virtual_authenticator), whose authenticator is a latchkey key that Chromium
reaches through the kernel's hidraw, as it reaches a USB security key.

    webdriver_intermediary.py --socket SOCK --intermediary BIN --ctl BIN --lib-dir DIR \\
        --browser-log FILE --work DIR

Runs inside the rig guest on the browsers image (guest-checks.sh --suite browsers),
against a latchkeyd whose own key has no transport: the only key Chromium can find is
the one the test adds. Chromium starts as the browser matrix starts it (chromium.py),
latchkey-webdriver forwards to its chromedriver, and Selenium's webdriver.Remote
attaches to it through latchkey-webdriver. The matrix's four cells (matrix.Session,
every result verified by Fido2Server) run in the page through Selenium, then the §11
commands are checked against what the page and the key see. Each check is a PASS/FAIL
line; details go to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # Tests/kernel: rp.py

from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from fido2.cose import ES256  # noqa: E402
from fido2.utils import websafe_decode  # noqa: E402
from fido2.webauthn import Aaguid, AttestedCredentialData, AuthenticatorData  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.common.virtual_authenticator import Credential, VirtualAuthenticatorOptions  # noqa: E402

import rp  # noqa: E402
from chromium import Chromium, free_port  # noqa: E402
from common import log, open_page, run_step, say  # noqa: E402
from matrix import PREFERRED, RP_ID, Session  # noqa: E402


class ThroughIntermediary(Chromium):
    """Chromium as the matrix starts it; once `driver` is set, its page is driven by
    Selenium through latchkey-webdriver."""

    name = "selenium"
    driver = None

    def run_script(self, script: str, *args):
        if self.driver is None:
            return super().run_script(script, *args)
        return self.driver.execute_script(script, *args)

    def reload(self) -> None:
        if self.driver is None:
            return super().reload()
        self.driver.get(self.url)


class Checks:
    def __init__(self, args):
        self.args = args

    def step(self, name: str, fn):
        """Runs one check: a PASS line with what fn returns, or a FAIL line."""
        passed, detail, seconds = run_step(name, fn)
        if not passed:
            return None
        say(f"PASS\t{name} ({seconds:.1f} s{': ' + str(detail) if detail else ''})")
        return detail if detail is not None else True

    def ctl(self, *argv: str):
        """latchkeyctl --json ...: (exit status, parsed output or None)."""
        out = subprocess.run([self.args.ctl, "--socket", self.args.socket, "--json", *argv], capture_output=True,
                             text=True, timeout=30, env=dict(os.environ, LD_LIBRARY_PATH=self.args.lib_dir))
        try:
            return out.returncode, json.loads(out.stdout) if out.stdout.strip() else None
        except ValueError:
            return out.returncode, None


def start_intermediary(args, upstream_port: int) -> tuple[subprocess.Popen, int]:
    port = free_port()
    argv = [args.intermediary, "--port", str(port), "--upstream", f"http://127.0.0.1:{upstream_port}",
            "--socket", args.socket, "--idle-timeout", "600", "--log-level", "debug"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                            stdout=open(os.path.join(args.work, "latchkey-webdriver.log"), "w"),
                            stderr=subprocess.STDOUT, env=dict(os.environ, LD_LIBRARY_PATH=args.lib_dir))
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, f"latchkey-webdriver exited {proc.returncode}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return proc, port
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError("latchkey-webdriver did not listen within 60 s") from None
            time.sleep(0.2)


def run(args, checks: Checks, browser: ThroughIntermediary, url: str) -> None:
    proc, port = start_intermediary(args, browser.driver_port)
    log(f"latchkey-webdriver on 127.0.0.1:{port}, upstream chromedriver on {browser.driver_port}")
    driver = None
    try:
        def attach():
            nonlocal driver
            options = webdriver.ChromeOptions()
            options.debugger_address = f"127.0.0.1:{browser.devtools}"
            driver = webdriver.Remote(command_executor=f"http://127.0.0.1:{port}", options=options)
            browser.driver = driver
            driver.set_script_timeout(30)
            driver.get(url)
            return f"session {driver.session_id}, {driver.title!r}"

        if not checks.step("webdriver.Remote through latchkey-webdriver attaches to Chromium", attach):
            return

        def add_authenticator():
            # As Selenium's documentation writes it.
            options = VirtualAuthenticatorOptions()
            options.protocol = VirtualAuthenticatorOptions.Protocol.CTAP2
            options.transport = VirtualAuthenticatorOptions.Transport.USB
            options.has_resident_key = True
            options.has_user_verification = True
            options.is_user_consenting = True
            options.is_user_verified = True
            driver.add_virtual_authenticator(options)
            name = driver.virtual_authenticator_id
            deadline = time.monotonic() + 60
            while True:
                code, key = checks.ctl("keys", "show", name)
                hidraw = (key or {}).get("uhid", {}).get("hidraw")
                if code == 0 and hidraw and os.path.exists(hidraw):
                    return name, key["aaguid"], hidraw
                assert time.monotonic() < deadline, f"no hidraw node for {name} within 60 s: {key}"
                time.sleep(0.2)

        added = checks.step("add_virtual_authenticator: a latchkey key on hidraw (presence auto, built-in UV)",
                            add_authenticator)
        if not added:
            return
        name, aaguid, hidraw = added
        log(f"virtual authenticator {name}: {hidraw}, aaguid {aaguid}")
        time.sleep(2)  # Chromium learns of the device through udev

        # The matrix's four cells, in the page, through Selenium and latchkey-webdriver.
        session = Session(browser, "uhid", "uv", aaguid, None)
        session.run()

        def get_credentials():
            credentials = driver.get_credentials()
            created = session.credentials.get("discoverable create")
            assert created, "no discoverable credential was created"
            want = bytes(created[0].credential_id)
            assert len(credentials) == 1, f"{len(credentials)} credentials; only the discoverable one is stored"
            [credential] = credentials
            assert websafe_decode(credential.id) == want, "not the credential the page created"
            assert credential.is_resident_credential and credential.rp_id == RP_ID
            assert websafe_decode(credential.user_handle) == bytes(created[1].id), "user handle"
            assert credential.sign_count == session.counters[want], \
                f"sign count {credential.sign_count}, the page saw {session.counters[want]}"
            serialization.load_der_private_key(websafe_decode(credential.private_key), None)
            return f"the page's discoverable credential, sign count {credential.sign_count}, its PKCS#8 key"

        checks.step("get_credentials: the credential Chromium created", get_credentials)

        private_key = ec.generate_private_key(ec.SECP256R1())
        pkcs8 = private_key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption())
        credential_id = bytearray(os.urandom(32))

        def add_credential_and_sign_in():
            driver.add_credential(Credential.create_resident_credential(
                credential_id, RP_ID, bytearray(os.urandom(16)), pkcs8, 41))
            attested = AttestedCredentialData.create(
                Aaguid(bytes.fromhex(aaguid)), bytes(credential_id), ES256.from_cryptography_key(private_key.public_key()))
            server = rp.make_server(RP_ID)
            options, state = server.authenticate_begin([attested], user_verification=PREFERRED)
            public_key = dict(options)["publicKey"]
            public_key["timeout"] = args.timeout_ms
            result = browser.request(public_key, "get", None)
            server.authenticate_complete(state, [attested], result["credential"])
            auth_data = AuthenticatorData(websafe_decode(result["credential"]["response"]["authenticatorData"]))
            assert auth_data.counter > 41, f"sign count {auth_data.counter} is not above the seeded 41"
            return f"{result['ms']} ms in the page, signature by the seeded key, sign count {auth_data.counter}"

        checks.step("add_credential, then navigator.credentials.get() in Chromium signs with it",
                    add_credential_and_sign_in)

        def remove_credential():
            driver.remove_credential(credential_id)
            ids = [websafe_decode(c.id) for c in driver.get_credentials()]
            assert bytes(credential_id) not in ids and len(ids) == 1, f"left: {len(ids)}"

        checks.step("remove_credential", remove_credential)

        def remove_all_credentials():
            driver.remove_all_credentials()
            assert driver.get_credentials() == []
            code, listed = checks.ctl("credentials", "list", "--key", name)
            assert code == 0 and listed == [], f"latchkeyctl credentials list: {code} {listed}"

        checks.step("remove_all_credentials: the key holds none", remove_all_credentials)

        def set_user_verified():
            driver.set_user_verified(False)
            code, state = checks.ctl("keys", "user-verified", name)
            assert code == 0 and state == {"isUserVerified": False}, f"{code} {state}"

        checks.step("set_user_verified(False): built-in UV may no longer succeed", set_user_verified)

        def remove_authenticator():
            driver.remove_virtual_authenticator()
            code, _ = checks.ctl("keys", "show", name)
            assert code == 4, f"latchkeyctl keys show {name}: exit {code}, the key is still there"
            deadline = time.monotonic() + 10
            while os.path.exists(hidraw):
                assert time.monotonic() < deadline, f"{hidraw} is still there"
                time.sleep(0.1)

        checks.step("remove_virtual_authenticator: the key and its hidraw node are gone", remove_authenticator)
    finally:
        if driver is not None:
            try:
                driver.quit()
            except Exception as e:  # noqa: BLE001
                log(f"quit: {e}")
            browser.driver = None
        stop_intermediary(args, checks, proc, "latchkey-webdriver exits 0 on SIGTERM")


def stop_intermediary(args, checks: Checks, proc: subprocess.Popen, name: str) -> None:
    """SIGTERM to latchkey-webdriver: the check `name` that it exits 0; its log's tail to stderr."""
    proc.terminate()
    try:
        code = proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()

    def exited_cleanly():
        assert code == 0, f"exit status {code}"

    checks.step(name, exited_cleanly)
    with open(os.path.join(args.work, "latchkey-webdriver.log"), errors="replace") as f:
        for line in f.read().splitlines()[-30:]:
            log("  latchkey-webdriver |", line[:300])


def main_with(make_browser, start_name: str, run_checks) -> int:
    """The command line both latchkey-webdriver checks take (see guest-checks.sh's
    intermediary_check), the page, the browser make_browser(args, url) makes and
    starts as the check start_name, then run_checks(args, checks, browser, url)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True, help="latchkeyd's control socket")
    ap.add_argument("--intermediary", required=True, help="the latchkey-webdriver binary")
    ap.add_argument("--ctl", required=True, help="the latchkeyctl binary")
    ap.add_argument("--lib-dir", default="", help="LD_LIBRARY_PATH for the two (the Swift runtime)")
    args, http, url, browser = open_page(ap, make_browser)
    checks = Checks(args)
    try:
        if checks.step(start_name.format(url=url), browser.start):
            run_checks(args, checks, browser, url)
    finally:
        browser.close()
        http.shutdown()
    return 0


def main() -> int:
    return main_with(ThroughIntermediary, "Chromium up with chromedriver, page {url}", run)


if __name__ == "__main__":
    sys.exit(main())
