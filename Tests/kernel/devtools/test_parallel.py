"""Parallel passkey tests that never share a key: run with pytest-xdist, each worker starts
its own browser and DevTools gateway as an account of its own (lk-w0, lk-w1, ...), adds
an authenticator through Playwright, and registers and signs in LK_ROUNDS times (default
20) on an RP of its own (wN.localhost), every result verified by Fido2Server. Then the
worker's getCredentials shows exactly its own credentials, the key holds no credential
of another RP, and the account's event stream (latchkeyctl events, as the account) shows
that no request of another RP reached the key.

    LK_ROUNDS=20 python3 -m pytest -n 4 -v test_parallel.py

LK_SHARED_ACCOUNT=NAME runs every worker as that one account with --isolation off: what
the isolation prevents. The test then records, instead of asserting, what reached which
key (LK_WORK/shared-wN.json), for devtools-checks.sh to report.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time

from fido2.server import Fido2Server
from fido2.webauthn import (
    AuthenticatorAttachment,
    PublicKeyCredentialRpEntity,
    PublicKeyCredentialUserEntity,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)
from playwright.sync_api import sync_playwright

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

ROUNDS = int(os.environ.get("LK_ROUNDS", "20"))
SHARED = os.environ.get("LK_SHARED_ACCOUNT")


def test_worker_keeps_to_its_own_key():
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:])
    account = SHARED or f"lk-w{worker}"
    rp_id = f"w{worker}.localhost"
    browser = harness.Browser(account, 30 + worker, isolation="off" if SHARED else "account").start()
    events_log = os.path.join(browser.work, "events.jsonl")
    events = subprocess.Popen(
        harness.as_account(account) + ["env", f"LD_LIBRARY_PATH={os.environ['LK_LIB']}",
                                       os.path.join(os.environ["LK_BIN"], "latchkeyctl"), "--socket",
                                       os.environ["LK_SOCKET"], "--json", "events"],
        stdout=open(events_log, "w"), stderr=subprocess.DEVNULL)
    port = harness.serve_page()
    server = Fido2Server(PublicKeyCredentialRpEntity(name=f"worker {worker}", id=rp_id))
    mine: list[bytes] = []
    try:
        with sync_playwright() as playwright:
            cdp_browser = playwright.chromium.connect_over_cdp(browser.cdp_url)
            page = cdp_browser.contexts[0].new_page()
            page.goto(f"http://{rp_id}:{port}/")
            cdp = page.context.new_cdp_session(page)
            cdp.send("WebAuthn.enable")
            authenticator = cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
                "protocol": "ctap2", "transport": "usb", "hasResidentKey": True, "hasUserVerification": True,
                "isUserVerified": True}})["authenticatorId"]
            code, key = harness.ctl("keys", "show", authenticator)
            assert code == 0, key
            node = key["uhid"]["hidraw"]
            info = os.stat(node)
            print(f"worker {worker}: {authenticator} on {node}, uid {info.st_uid}, mode {oct(info.st_mode & 0o777)}")
            if not SHARED:
                assert info.st_uid == key["owner"]["uid"] and info.st_mode & 0o777 == 0o600, (node, info)
            page.wait_for_timeout(2000)  # Chromium hears of the device from udev
            t0 = time.monotonic()
            for round in range(ROUNDS):
                user = PublicKeyCredentialUserEntity(id=os.urandom(16), name=f"w{worker}-{round}",
                                                     display_name=f"Worker {worker} #{round}")
                options, state = server.register_begin(
                    user, resident_key_requirement=ResidentKeyRequirement.REQUIRED,
                    user_verification=UserVerificationRequirement.REQUIRED,
                    authenticator_attachment=AuthenticatorAttachment.CROSS_PLATFORM)
                created = harness.webauthn(page, "create", options)
                assert created["ok"], f"round {round}: create: {created['error']}"
                credential = server.register_complete(state, created["credential"]).credential_data
                options, state = server.authenticate_begin([credential],
                                                           user_verification=UserVerificationRequirement.REQUIRED)
                got = harness.webauthn(page, "get", options)
                assert got["ok"], f"round {round}: get: {got['error']}"
                server.authenticate_complete(state, [credential], got["credential"])
                mine.append(bytes(credential.credential_id))
            print(f"worker {worker}: {ROUNDS} registrations and sign-ins in {time.monotonic() - t0:.1f} s")
            listed = cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator})["credentials"]
            ids = sorted(base64.b64decode(c["credentialId"]) for c in listed)
            rps = sorted({c["rpId"] for c in listed})
            time.sleep(2)  # the last events reach the stream
            events.terminate()
            events.wait(10)
            seen = [json.loads(line) for line in open(events_log) if line.strip()]
            on_mine = [e for e in seen if e.get("key") == authenticator and "rpId" in e]
            foreign = [e for e in on_mine if e["rpId"] != rp_id]
            requests = [e for e in on_mine if e.get("event") == "presence.requested"]
            if SHARED:
                with open(os.path.join(os.environ.get("LK_WORK", "/tmp"), f"shared-w{worker}.json"), "w") as f:
                    json.dump({"worker": worker, "key": authenticator, "credentials": len(listed), "rps": rps,
                               "own": len(set(ids) & set(mine)), "foreign_events": len(foreign),
                               "foreign_rps": sorted({e["rpId"] for e in foreign})}, f)
                print(f"worker {worker} (shared account): {len(listed)} credentials of {rps} on its key; "
                      f"{len(foreign)} events of other RPs on it")
            else:
                assert ids == sorted(mine), f"getCredentials: {len(ids)} credentials, {len(set(ids) & set(mine))} of them this worker's"
                assert rps == [rp_id], f"the key holds credentials of {rps}"
                assert not foreign, f"requests of other RPs reached this worker's key: {foreign[:3]}"
                assert len(requests) >= 2 * ROUNDS, f"{len(requests)} presence requests for {2 * ROUNDS} operations"
                print(f"worker {worker}: getCredentials lists exactly its {len(ids)} credentials, all of {rp_id}; "
                      f"{len(requests)} presence requests on its key, none of another RP")
            cdp.send("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": authenticator})
    finally:
        if events.poll() is None:
            events.terminate()
        status = browser.stop()
        assert status == 0, f"the gateway exited {status}: {browser.tail('gateway.log')}"
