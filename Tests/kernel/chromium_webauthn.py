#!/usr/bin/env python3
"""Headless Chromium makes and uses a credential on a latchkey key through the
guest kernel's hidraw, driven by chromedriver over plain W3C WebDriver HTTP.

    chromium_webauthn.py [--chromedriver PATH] [--timeout-ms 60000]

Runs inside the rig guest on the chromium image (see guest-checks.sh, which runs
it as a coprocess). It starts chromedriver, one Chromium session and an HTTP
server for a page on http://localhost (a secure context), prints READY, then
reads commands on stdin, one a line:

    run LABEL AAGUID
                the page calls navigator.credentials.create() (cross-platform,
                userVerification "discouraged", residentKey "discouraged",
                attestation "direct"), then navigator.credentials.get() with the
                new credential's id in allowCredentials. Both results come back as
                PublicKeyCredential.toJSON() and are verified by python-fido2's
                Fido2Server (attestation signature included), and the
                credential must carry AAGUID (so it came from that key). Prints
                PASS<TAB>name / FAIL<TAB>name<TAB>why per check, then DONE LABEL.
    quit        (or end of input) closes the session and chromedriver.

Only one authenticator should be present during a run: Chromium sends the request
to every key it finds and takes the first answer. Non-discoverable flows only:
Chromium 156 demands user verification for a discoverable create and for a
usernameless get. Details go to stderr, each line starting with "#".

LK_CHROMIUM_ARGS="--flag ..." adds Chromium command-line flags (for debugging).

Headless Chromium keeps a WebAuthn promise pending when the only key answered an
error (it has no dialog to dismiss), so the page stores the outcome in a window
variable that this script polls, instead of awaiting it in execute/async.
"""

from __future__ import annotations

import time

T0 = time.monotonic()

import argparse
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
import urllib.error
import urllib.request

from fido2.utils import websafe_decode
from fido2.webauthn import (
    AttestationObject,
    AuthenticatorAttachment,
    AuthenticatorData,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

import rp

RP_ID = "localhost"
PAGE = b"""<!doctype html><html><head><title>latchkey kernel test</title></head>
<body><p>latchkey: WebAuthn through the kernel's hidraw</p></body></html>"""

# arguments[0]: the options as WebAuthn JSON, arguments[1]: "create" or "get"
START = """
const [json, kind] = arguments;
const t0 = performance.now();
window.lkResult = {state: "pending"};
const finish = r => { r.ms = Math.round(performance.now() - t0); window.lkResult = r; };
try {
  const publicKey = kind === "create" ? PublicKeyCredential.parseCreationOptionsFromJSON(json)
                                      : PublicKeyCredential.parseRequestOptionsFromJSON(json);
  const request = kind === "create" ? navigator.credentials.create({publicKey})
                                    : navigator.credentials.get({publicKey});
  request.then(c => finish({state: "ok", credential: c.toJSON()}),
               e => finish({state: "error", error: e.name + ": " + e.message}));
} catch (e) {
  finish({state: "error", error: "before the request: " + e.name + ": " + e.message});
}
"""


def log(*args) -> None:
    print("#", *args, file=sys.stderr, flush=True)


def say(line: str) -> None:
    print(line, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *a):
        pass


class WebDriver:
    """The few W3C WebDriver endpoints this test needs."""

    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}"
        self.session = None

    def call(self, method: str, path: str, body=None, timeout: float = 120):
        req = urllib.request.Request(self.base + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.load(r)["value"]
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"WebDriver {method} {path}: HTTP {e.code} {e.read()[:500]!r}") from None

    def run(self, script: str, *args):
        return self.call("POST", f"/session/{self.session}/execute/sync", {"script": script, "args": list(args)})


class Driver:
    def __init__(self, args):
        self.args = args
        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://localhost:{self.http.server_address[1]}/"
        self.profile = tempfile.mkdtemp(prefix="lk-chromium-")
        port = free_port()
        self.chromedriver = subprocess.Popen(
            [args.chromedriver, f"--port={port}"], stdin=subprocess.DEVNULL,
            stdout=open(args.chromedriver_log, "w"), stderr=subprocess.STDOUT)
        self.wd = WebDriver(port)

    def start(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            try:
                if self.wd.call("GET", "/status", timeout=5).get("ready"):
                    break
            except Exception:  # noqa: BLE001 - not up yet
                pass
            if time.monotonic() > deadline or self.chromedriver.poll() is not None:
                raise RuntimeError("chromedriver did not become ready")
            time.sleep(0.2)
        log(f"chromedriver ready after {time.monotonic() - T0:.1f} s (since the script started)")

        def capabilities(profile: str) -> dict:
            chromium_args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                             "--no-first-run", f"--user-data-dir={profile}"]
            chromium_args += os.environ.get("LK_CHROMIUM_ARGS", "").split()
            if self.args.chromium_log:
                chromium_args += ["--enable-logging", f"--log-file={self.args.chromium_log}", "--v=0",
                                  "--vmodule=*/device/fido/*=2,*/webauthn/*=2"]
            return {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
                "binary": self.args.chromium, "args": chromium_args}}}}

        # under TCG on a busy host a cold Chromium takes 30-50 s to start and as long
        # again for its first page; these limits leave room for several times that
        t0 = time.monotonic()
        try:
            value = self.wd.call("POST", "/session", capabilities(self.profile + "/1"), timeout=240)
        except RuntimeError as e:
            # chromedriver gives a starting Chromium 60 s; a cold start on a busy host
            # can take about that long, and a second start is faster (warm page cache)
            log(f"no session after {time.monotonic() - t0:.1f} s ({e}); trying once more")
            value = self.wd.call("POST", "/session", capabilities(self.profile + "/2"), timeout=240)
        self.wd.session = value["sessionId"]
        log(f"chromium {value.get('capabilities', {}).get('browserVersion')} session in "
            f"{time.monotonic() - t0:.1f} s")
        self.wd.call("POST", f"/session/{self.wd.session}/timeouts", {"script": 30000})
        t0 = time.monotonic()
        self.wd.call("POST", f"/session/{self.wd.session}/url", {"url": self.url}, timeout=240)
        log(f"page loaded in {time.monotonic() - t0:.1f} s")
        ua, ok = self.wd.run("return [navigator.userAgent, window.isSecureContext && !!navigator.credentials"
                             " && !!PublicKeyCredential.parseCreationOptionsFromJSON]")
        log(f"page {self.url}: {ua}; secure context with WebAuthn JSON: {ok}")
        if not ok:
            raise RuntimeError("the page has no navigator.credentials or parseCreationOptionsFromJSON")

    def request(self, options: dict, kind: str) -> dict:
        """Starts create/get in the page and polls for its outcome."""
        self.wd.run(START, options, kind)
        deadline = time.monotonic() + self.args.timeout_ms / 1000 + 30
        result = {"state": "pending"}
        while time.monotonic() < deadline:
            result = self.wd.run("return window.lkResult")
            if result.get("state") != "pending":
                break
            time.sleep(0.5)
        if result.get("state") != "ok":
            raise AssertionError(f"navigator.credentials.{kind}(): {result.get('error', 'still pending')}"
                                 f" after {result.get('ms', '?')} ms")
        log(f"navigator.credentials.{kind}() answered in {result['ms']} ms: "
            f"{json.dumps(result['credential'])[:600]}")
        return result

    def webauthn(self, label: str, aaguid: str) -> None:
        server = rp.make_server(RP_ID)
        create_name = (f"{label}: chromium navigator.credentials.create() (cross-platform, uv discouraged, "
                       f"direct attestation) verified by Fido2Server, aaguid of the key")
        get_name = f"{label}: chromium navigator.credentials.get() (allowCredentials) verified by Fido2Server"
        try:
            options, state = server.register_begin(
                rp.new_user("chromium"), resident_key_requirement=ResidentKeyRequirement.DISCOURAGED,
                user_verification=UserVerificationRequirement.DISCOURAGED,
                authenticator_attachment=AuthenticatorAttachment.CROSS_PLATFORM)
            public_key = dict(options)["publicKey"]
            public_key["timeout"] = self.args.timeout_ms
            result = self.request(public_key, "create")
            auth_data = server.register_complete(state, result["credential"])
            credential = auth_data.credential_data
            assert credential is not None and auth_data.is_user_present()
            assert bytes(credential.aaguid).hex() == aaguid.lower(), \
                f"aaguid {bytes(credential.aaguid).hex()}: not the key under test ({aaguid})"
            fmt = AttestationObject(websafe_decode(result["credential"]["response"]["attestationObject"])).fmt
            say(f"PASS\t{create_name} ({result['ms']} ms, fmt={fmt}, sign count {auth_data.counter})")
        except Exception as e:  # noqa: BLE001 - reported as a failed check
            self.fail(create_name, e)
            self.fail(get_name, "prerequisite failed: create")
            return
        try:
            options, state = server.authenticate_begin(
                [credential], user_verification=UserVerificationRequirement.DISCOURAGED)
            public_key = dict(options)["publicKey"]
            public_key["timeout"] = self.args.timeout_ms
            result = self.request(public_key, "get")
            server.authenticate_complete(state, [credential], result["credential"])
            response = result["credential"]["response"]
            count = AuthenticatorData(websafe_decode(response["authenticatorData"])).counter
            assert count > auth_data.counter, f"sign count {count} did not grow past {auth_data.counter}"
            say(f"PASS\t{get_name} ({result['ms']} ms, sign count {count})")
        except Exception as e:  # noqa: BLE001 - reported as a failed check
            self.fail(get_name, e)

    @staticmethod
    def fail(name: str, error) -> None:
        if isinstance(error, BaseException):
            for line in traceback.format_exception(error):
                for part in line.rstrip().splitlines():
                    log("   ", part)
            error = f"{type(error).__name__}: {error}"
        say(f"FAIL\t{name}\t{error}".replace("\n", " "))

    def close(self) -> None:
        if self.wd.session:
            try:
                self.wd.call("DELETE", f"/session/{self.wd.session}", timeout=60)
            except Exception as e:  # noqa: BLE001
                log(f"closing the session: {e}")
        self.chromedriver.terminate()
        try:
            self.chromedriver.wait(10)
        except subprocess.TimeoutExpired:
            self.chromedriver.kill()
            self.chromedriver.wait()
        self.http.shutdown()
        shutil.rmtree(self.profile, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    ap.add_argument("--chromedriver-log", default="/tmp/chromedriver.log")
    ap.add_argument("--chromium-log", help="let Chromium log its FIDO code to this file")
    ap.add_argument("--timeout-ms", type=int, default=60000, help="WebAuthn timeout of each request")
    args = ap.parse_args()

    driver = Driver(args)
    start_name = "chromium: chromedriver session on http://localhost (secure context, WebAuthn JSON)"
    try:
        t0 = time.monotonic()
        driver.start()
        say(f"PASS\t{start_name} ({time.monotonic() - t0:.1f} s)")
        ok = True
    except Exception as e:  # noqa: BLE001
        driver.fail(start_name, e)
        ok = False
    say("READY" if ok else "DONE start")
    try:
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] == "quit":
                break
            if words[0] == "run" and len(words) >= 2:
                if len(words) != 3:
                    driver.fail(f"{words[1]}: chromium run", f"bad command {line.strip()!r}")
                elif ok:
                    driver.webauthn(words[1], words[2])
                say(f"DONE {words[1]}")
            else:
                log(f"unknown command {line.strip()!r}")
    finally:
        driver.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
