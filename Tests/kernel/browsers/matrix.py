#!/usr/bin/env python3
"""The browser matrix: one real browser (Chromium through chromedriver, or Firefox ESR
through Marionette) runs the four WebAuthn flows against the latchkey key that
guest-checks.sh has plugged in, and python-fido2's Fido2Server verifies every result.

    matrix.py --browser chromium|firefox --browser-log FILE [--timeout-ms 60000]

Runs inside the rig guest on the browsers image, as a coprocess of guest-checks.sh
(--suite browsers). It serves a page on http://localhost (a secure context), starts
one browser session, prints READY, then reads commands on stdin, one a line:

    run TRANSPORT MODE AAGUID [PIN]
        the four cells of this key, in order, each a PASS/FAIL line:
          discoverable create     residentKey required, userVerification required
          non-discoverable create residentKey discouraged, userVerification preferred
          allowList get           allowCredentials [the non-discoverable one], uv preferred
          usernameless get        no allowCredentials, uv required: must pick the
                                  discoverable credential and return its user handle
        With MODE "uv", more cells, each an RP that accepts only one algorithm
        (pubKeyCredParams of that one): the browser registers a non-discoverable
        credential of it and signs in with it. Both browsers: RS256, PS256; Firefox:
        ES384; Chromium: ML-DSA-65 and ML-DSA-87, and ES384 refused: Chromium's COSE
        key parser (device/fido/public_key.cc, PublicKey::FromCOSEKey) takes only
        P-256 EC2 keys, so it answers any P-384, P-521 or secp256k1 credential with
        "rejected CBOR structure" and NotAllowedError; the cell checks exactly that.
        Every result goes through Fido2Server (register_complete with the packed
        attestation's signature, authenticate_complete); the credential carries AAGUID;
        the flags are UP=1 UV=1 BE=0 BS=0; credProps.rk says what was asked; each
        assertion's signature counter is above the credential's last one. MODE is
        "uv" (a key whose policy grants built-in UV: no PIN prompt may appear) or
        "pin" (a key with PIN: the test answers the browser's PIN prompt, and each
        cell must have shown it). Then DONE TRANSPORT MODE.
    quit
        (or end of input) closes the browser.

A failing cell prints, after its FAIL line, the browser's own log lines of that step
("#   | ..."). Only one authenticator may be present during a run: a browser sends
the request to every key it finds. Details go to stderr ("# ...").
"""

from __future__ import annotations

import time

T0 = time.monotonic()

import argparse
import os
import sys

from fido2.utils import websafe_decode
from fido2.webauthn import (
    AttestationObject,
    AuthenticatorAttachment,
    AuthenticatorData,
    PublicKeyCredentialParameters,
    PublicKeyCredentialType,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # Tests/kernel: rp.py

import rp  # noqa: E402
from common import RequestFailed, fail_line, log, open_page, run_step, say, show_log  # noqa: E402

RP_ID = "localhost"
REQUIRED = UserVerificationRequirement.REQUIRED
PREFERRED = UserVerificationRequirement.PREFERRED


def check_flags(auth_data: AuthenticatorData) -> str:
    """UP and UV set (both modes verify the user), BE and BS clear (a device-bound key)."""
    flags = {"UP": auth_data.is_user_present(), "UV": auth_data.is_user_verified(),
             "BE": auth_data.is_backup_eligible(), "BS": auth_data.is_backed_up()}
    want = {"UP": True, "UV": True, "BE": False, "BS": False}
    assert flags == want, f"flags {flags}, expected {want}"
    return "UP UV"


class Session:
    """The four cells against one key (one transport, one mode)."""

    def __init__(self, browser, transport: str, mode: str, aaguid: str, pin: str | None):
        self.browser = browser
        self.mode = mode
        self.aaguid = aaguid.lower().replace("-", "")
        self.pin = pin if mode == "pin" else None
        self.prefix = f"{browser.name} {transport} {mode}"
        self.server = rp.make_server(RP_ID)
        self.credentials = {}  # flow -> (AttestedCredentialData, user entity)
        self.counters = {}  # credential id -> last signature counter
        self.passed = 0

    def prompts(self) -> str:
        """The PIN prompts of the request are what the mode says: one or more with a PIN, none with built-in UV."""
        n = self.browser.pin_prompts
        if self.mode == "pin":
            assert n >= 1, "no PIN prompt was answered, yet the key has a PIN and no built-in UV"
            return f"{n} PIN prompt{'s' if n > 1 else ''} answered"
        assert n == 0, f"{n} PIN prompt(s) appeared for a key with policy-granted built-in UV"
        return "no prompt"

    def cell(self, flow: str, fn, *requires: str) -> None:
        name = f"{self.prefix}: {flow}"
        missing = [r for r in requires if r not in self.credentials]
        if missing:
            fail_line(name, f"prerequisite failed: {', '.join(missing)}")
            return
        passed, detail, seconds = run_step(name, fn, lambda: self.browser.log.since(self.mark))
        if not passed:
            return
        self.passed += 1
        say(f"PASS\t{name} ({seconds:.1f} s: {detail})")

    def request(self, options, kind: str) -> dict:
        public_key = dict(options)["publicKey"]
        public_key["timeout"] = self.browser.args.timeout_ms
        self.mark = self.browser.log.mark()
        return self.browser.request(public_key, kind, self.pin)

    def create(self, flow: str, resident: bool) -> str:
        user = rp.new_user(f"{self.browser.name}-{'rk' if resident else 'nonrk'}")
        options, state = self.server.register_begin(
            user,
            resident_key_requirement=ResidentKeyRequirement.REQUIRED if resident
            else ResidentKeyRequirement.DISCOURAGED,
            user_verification=REQUIRED if resident else PREFERRED,
            authenticator_attachment=AuthenticatorAttachment.CROSS_PLATFORM,
            extensions={"credProps": True})
        result = self.request(options, "create")
        credential_json = result["credential"]
        auth_data = self.server.register_complete(state, credential_json)
        credential = auth_data.credential_data
        assert credential is not None, "no attested credential data"
        got = bytes(credential.aaguid).hex()
        assert got == self.aaguid, f"aaguid {got}: not the key under test ({self.aaguid})"
        flags = check_flags(auth_data)
        rk = (credential_json.get("clientExtensionResults") or {}).get("credProps", {}).get("rk")
        assert rk is resident, f"credProps.rk is {rk!r}, asked for a {'' if resident else 'non-'}discoverable credential"
        fmt = AttestationObject(websafe_decode(credential_json["response"]["attestationObject"])).fmt
        prompts = self.prompts()
        self.credentials[flow] = (credential, user)
        self.counters[bytes(credential.credential_id)] = auth_data.counter
        return f"{result['ms']} ms in the page, fmt {fmt}, {flags}, rk {rk}, sign count {auth_data.counter}, {prompts}"

    def get(self, flow: str, allow: str | None, expect: str) -> str:
        credential, user = self.credentials[expect]
        options, state = self.server.authenticate_begin(
            [self.credentials[allow][0]] if allow else None,
            user_verification=PREFERRED if allow else REQUIRED)
        if not allow:
            assert not dict(options)["publicKey"].get("allowCredentials"), "a usernameless get lists credentials"
        result = self.request(options, "get")
        response = result["credential"]["response"]
        everything = [c for c, _ in self.credentials.values()]
        matched = self.server.authenticate_complete(state, everything, result["credential"])
        assert bytes(matched.credential_id) == bytes(credential.credential_id), \
            f"the assertion is by {expect!r}'s credential? it is by another one"
        if not allow:
            handle = websafe_decode(response.get("userHandle") or "")
            assert handle == bytes(user.id), f"userHandle {handle.hex()} is not the user's id {bytes(user.id).hex()}"
        auth_data = AuthenticatorData(websafe_decode(response["authenticatorData"]))
        flags = check_flags(auth_data)
        key = bytes(credential.credential_id)
        assert auth_data.counter > self.counters[key], \
            f"sign count {auth_data.counter} is not above the credential's last one, {self.counters[key]}"
        before, self.counters[key] = self.counters[key], auth_data.counter
        prompts = self.prompts()
        return (f"{result['ms']} ms in the page, {flags}, sign count {before} -> {auth_data.counter}"
                f"{', user handle returned' if not allow else ''}, {prompts}")

    def one_algorithm(self, name: str, alg: int) -> str:
        """Register with an RP that accepts only `alg`, then sign in with that credential."""
        server = rp.make_server(RP_ID)
        server.allowed_algorithms = [a for a in server.allowed_algorithms if a.alg == alg] or \
            [PublicKeyCredentialParameters(type=PublicKeyCredentialType.PUBLIC_KEY, alg=alg)]
        user = rp.new_user(f"{self.browser.name}-{name.lower()}")
        options, state = server.register_begin(
            user, resident_key_requirement=ResidentKeyRequirement.DISCOURAGED, user_verification=PREFERRED,
            authenticator_attachment=AuthenticatorAttachment.CROSS_PLATFORM)
        params = [p["alg"] for p in dict(options)["publicKey"]["pubKeyCredParams"]]
        assert params == [alg], f"the RP offers {params}, not only {alg}"
        created = self.request(options, "create")
        credential = server.register_complete(state, created["credential"]).credential_data
        assert credential is not None and credential.public_key.ALGORITHM == alg, \
            f"the credential's key is {getattr(credential, 'public_key', None)!r}, not alg {alg}"
        options, state = server.authenticate_begin([credential], user_verification=PREFERRED)
        got = self.request(options, "get")
        server.authenticate_complete(state, [credential], got["credential"])
        return f"{name} credential made in {created['ms']} ms and used in {got['ms']} ms, {self.prompts()}"

    def refused_curve(self, name: str, alg: int) -> str:
        """Chromium refuses an EC2 credential not on P-256: the request fails with
        NotAllowedError and its log names the response it rejected."""
        server = rp.make_server(RP_ID)
        server.allowed_algorithms = [a for a in server.allowed_algorithms if a.alg == alg]
        options, _ = server.register_begin(
            rp.new_user(f"{self.browser.name}-{name.lower()}"),
            resident_key_requirement=ResidentKeyRequirement.DISCOURAGED, user_verification=PREFERRED,
            authenticator_attachment=AuthenticatorAttachment.CROSS_PLATFORM)
        try:
            self.request(options, "create")
        except RequestFailed as e:
            lines = e.args[1]
            assert "NotAllowedError" in e.args[0], f"the request failed otherwise: {e.args[0]}"
            assert any("rejected CBOR structure" in line for line in lines), \
                "NotAllowedError, but the browser's log does not say it rejected the key's response"
            return f"{name} refused as expected: NotAllowedError, 'rejected CBOR structure' in Chromium's log"
        raise AssertionError(f"Chromium accepted a {name} credential: it now parses that curve; make this an ordinary cell")

    def run(self) -> int:
        t = time.monotonic()
        self.mark = self.browser.log.mark()
        self.cell("discoverable create", lambda: self.create("discoverable create", True))
        self.cell("non-discoverable create", lambda: self.create("non-discoverable create", False))
        self.cell("allowList get", lambda: self.get("allowList get", "non-discoverable create",
                                                    "non-discoverable create"),
                  "non-discoverable create")
        self.cell("usernameless get", lambda: self.get("usernameless get", None, "discoverable create"),
                  "discoverable create")
        cells = 4
        # The algorithm cells belong to the matrix's own browsers; the Selenium check
        # (webdriver_intermediary.py, a Chromium named "selenium") runs the four above.
        if self.mode == "uv" and self.browser.name in ("chromium", "firefox"):
            algorithms = [("RS256", -257), ("PS256", -37)]
            algorithms += [("ML-DSA-65", -49), ("ML-DSA-87", -50)] if self.browser.name == "chromium" else [("ES384", -35)]
            for name, alg in algorithms:
                self.cell(f"{name}-only RP create + get", lambda: self.one_algorithm(name, alg))
            if self.browser.name == "chromium":
                self.cell("ES384-only RP: refused by Chromium (P-256 is the only EC2 curve it parses)",
                          lambda: self.refused_curve("ES384", -35))
            cells += len(algorithms) + (self.browser.name == "chromium")
        log(f"{self.prefix}: {self.passed}/{cells} cells passed in {time.monotonic() - t:.1f} s")
        return self.passed


def make_browser(args, url: str):
    if args.browser == "chromium":
        from chromium import Chromium
        return Chromium(args, url)
    if args.browser == "firefox":
        from firefox import Firefox
        return Firefox(args, url)
    raise SystemExit(f"unknown browser {args.browser}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--browser", required=True, choices=("chromium", "firefox"))
    args, http, url, browser = open_page(ap, make_browser)
    start_name = f"{args.browser}: session on {url} (secure context, WebAuthn JSON)"
    ok = False
    try:
        t0 = time.monotonic()
        browser.start()
        say(f"PASS\t{start_name} ({time.monotonic() - t0:.1f} s; {time.monotonic() - T0:.1f} s since python started)")
        ok = True
    except Exception as e:  # noqa: BLE001
        fail_line(start_name, e)
        show_log(browser.log.since(0))
    say("READY" if ok else "DONE start")
    try:
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] == "quit":
                break
            if words[0] == "run" and len(words) in (4, 5):
                _, transport, mode, aaguid, *pin = words
                if ok:
                    Session(browser, transport, mode, aaguid, pin[0] if pin else None).run()
                say(f"DONE {transport} {mode}")
            else:
                log(f"unknown command {line.strip()!r}")
                say("DONE ? ?")
    finally:
        browser.close()
        http.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
