#!/usr/bin/env python3
"""A Puppeteer-style passkey test in plain CDP: JSON over a WebSocket (websocket-client),
no Playwright. Discovery (/json/version) through the DevTools gateway, the browser's
WebSocket, a new page target with a flat session, WebAuthn.enable and
addVirtualAuthenticator, a registration and a sign-in in the page through
Runtime.evaluate (awaitPromise), the credentialAdded and credentialAsserted events, and
getCredentials; every result verified by Fido2Server.

    raw_cdp.py --url http://127.0.0.1:9223

Prints PASS/FAIL lines (tab-separated) for devtools-checks.sh.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
import urllib.request

import websocket
from fido2.server import Fido2Server
from fido2.utils import websafe_decode
from fido2.webauthn import (
    AuthenticatorAttachment,
    AuthenticatorData,
    PublicKeyCredentialRpEntity,
    PublicKeyCredentialUserEntity,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


class CDP:
    def __init__(self, url: str):
        self.ws = websocket.create_connection(url, timeout=300, suppress_origin=True)
        self.next_id = 1
        self.events: list[dict] = []

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.next_id += 1
        self.ws.send(json.dumps(message))
        while True:
            answer = json.loads(self.ws.recv())
            if answer.get("id") == message["id"]:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]
            self.events.append(answer)

    def event(self, method: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            assert time.monotonic() < deadline, f"no {method} within {timeout} s"
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                self.events.append(json.loads(self.ws.recv()))
            except websocket.WebSocketTimeoutException:
                pass
            finally:
                self.ws.settimeout(300)


def evaluate(cdp: CDP, session: str, kind: str, options) -> dict:
    public_key = json.loads(json.dumps(dict(options)["publicKey"]))
    public_key["timeout"] = 60000
    expression = f"({harness.WEBAUTHN})({json.dumps([kind, public_key, 75000])})"
    result = cdp.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True},
                      session)
    value = result["result"].get("value")
    assert value and value["ok"], f"navigator.credentials.{kind}(): {value or result}"
    return value["credential"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True, help="the DevTools gateway's address")
    args = ap.parse_args()
    origin = f"http://localhost:{harness.serve_page()}/"
    server = Fido2Server(PublicKeyCredentialRpEntity(name="latchkey raw CDP", id="localhost"))
    steps = []

    def step(name: str, fn):
        t = time.monotonic()
        try:
            detail = fn()
        except Exception as e:  # noqa: BLE001
            print(f"FAIL\traw CDP: {name}\t{type(e).__name__}: {e}"[:800], flush=True)
            return None
        print(f"PASS\traw CDP: {name} ({time.monotonic() - t:.1f} s{': ' + str(detail) if detail else ''})",
              flush=True)
        steps.append(name)
        return detail if detail is not None else True

    state = {}

    def connect():
        with urllib.request.urlopen(args.url + "/json/version", timeout=30) as response:
            version = json.load(response)
        url = version["webSocketDebuggerUrl"]
        assert url.startswith(args.url.replace("http://", "ws://") + "/devtools/browser/"), url
        state["cdp"] = cdp = CDP(url)
        target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        state["session"] = session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        cdp.call("Page.enable", None, session)
        cdp.call("Page.navigate", {"url": origin}, session)
        cdp.event("Page.loadEventFired", 120)
        return f"{version.get('Browser')} through {url}, flat session {session}"

    if not step("discovery, the browser's WebSocket, a page with a flat session", connect):
        return 0
    cdp, session = state["cdp"], state["session"]

    def add():
        cdp.call("WebAuthn.enable", {"enableUI": False}, session)
        state["id"] = cdp.call("WebAuthn.addVirtualAuthenticator", {"options": {
            "protocol": "ctap2", "transport": "usb", "hasResidentKey": True, "hasUserVerification": True,
            "isUserVerified": True}}, session)["authenticatorId"]
        code, key = harness.ctl("keys", "show", state["id"])
        assert code == 0 and key["uhid"]["hidraw"], f"no latchkey key with a hidraw node: {code} {key}"
        return f"{state['id']} on {key['uhid']['hidraw']}"

    if not step("WebAuthn.enable, addVirtualAuthenticator: a latchkey key on hidraw", add):
        return 0
    time.sleep(2)  # Chromium hears of the device from udev

    def register_and_sign_in():
        user = PublicKeyCredentialUserEntity(id=os.urandom(16), name="carol", display_name="Carol")
        options, reg = server.register_begin(
            user, resident_key_requirement=ResidentKeyRequirement.REQUIRED,
            user_verification=UserVerificationRequirement.REQUIRED,
            authenticator_attachment=AuthenticatorAttachment.CROSS_PLATFORM)
        credential = server.register_complete(reg, evaluate(cdp, session, "create", options)).credential_data
        added = cdp.event("WebAuthn.credentialAdded")
        assert added.get("sessionId") == session and added["params"]["authenticatorId"] == state["id"], added
        assert base64.b64decode(added["params"]["credential"]["credentialId"]) == bytes(credential.credential_id)
        options, auth = server.authenticate_begin(user_verification=UserVerificationRequirement.REQUIRED)
        got = evaluate(cdp, session, "get", options)
        server.authenticate_complete(auth, [credential], got)
        counter = AuthenticatorData(websafe_decode(got["response"]["authenticatorData"])).counter
        asserted = cdp.event("WebAuthn.credentialAsserted")
        assert asserted["params"]["credential"]["signCount"] == counter, asserted
        [listed] = cdp.call("WebAuthn.getCredentials", {"authenticatorId": state["id"]}, session)["credentials"]
        assert listed["signCount"] == counter and listed["privateKey"], listed
        return f"registered and signed in usernameless, credentialAdded and credentialAsserted, sign count {counter}"

    step("register, sign in, the events, getCredentials (Fido2Server verifies)", register_and_sign_in)

    def detach():
        cdp.call("Target.detachFromTarget", {"sessionId": session})
        deadline = time.monotonic() + 20
        while harness.ctl("keys", "show", state["id"])[0] == 0:
            assert time.monotonic() < deadline, "the key outlived its session"
            time.sleep(0.2)

    step("Target.detachFromTarget: the session's key is gone", detach)
    cdp.ws.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
