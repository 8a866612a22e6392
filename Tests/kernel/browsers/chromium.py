"""Chromium (Debian's chromium + chromium-driver), driven through chromedriver over
plain W3C WebDriver HTTP, with a window on an Xvfb display.

Headless Chromium has no WebAuthn dialog, so it cannot ask for a PIN: a key with a
PIN and no built-in UV never gets a discoverable credential from it. So Chromium
runs headful on Xvfb, and the test answers its PIN sheet as a person would: it types
the PIN with xdotool (XTEST key events into the focused window, where Chromium has
focused the sheet's PIN field) and presses Return. It types when Chromium's own FIDO
log shows it asking the key for its PIN retries (which it does right before the PIN
sheet), or, with no such line, once the request has waited PIN_BLIND_AFTER seconds;
and again if no PIN reached the key 25 s later (the field was not shown yet);
select-all before typing makes a second try replace the first.
A key with built-in UV must never get there: the count of PIN collections is checked
to be zero.

Chromium logs its FIDO code (--vmodule for device/fido and webauthn) to the browser
log, which the matrix reads per step.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from common import PROBE, Browser, log

# Chromium's FIDO log shows each CTAP2 request as its command byte and CBOR in
# diagnostic notation ("<- 0x6 (kAuthenticatorClientPin) {1: 2, 2: 1}"): clientPIN
# getPINRetries (subCommand 2: 1) comes right before Chromium shows its PIN sheet;
# getPinToken (5) or getPinUvAuthTokenUsingPinWithPermissions (9) once the sheet took
# a PIN.
CLIENT_PIN = r"<- (?:0x)?6 (?:\(\w+\) )?\{(?:1: \d+, )?2: "
PIN_COLLECTION = re.compile(CLIENT_PIN + r"1[,}]")
PIN_TAKEN = re.compile(CLIENT_PIN + r"(?:5|9)[,}]")
# with no such line (a Chromium that logs less), a request still pending this long
# on a key with a PIN is taken to wait at the PIN sheet
PIN_BLIND_AFTER = 12.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


class Chromium(Browser):
    name = "chromium"

    def __init__(self, args, url: str):
        super().__init__(args, url)
        self.work = tempfile.mkdtemp(prefix="lk-chromium-", dir=args.work)
        # LK_CHROMIUM_DISPLAY: an X display that is already there (a login user's own
        # Xvfb, desktop.py); else the browser gets an Xvfb of its own on :99
        self.display = os.environ.get("LK_CHROMIUM_DISPLAY") or ":99"
        self.own_display = not os.environ.get("LK_CHROMIUM_DISPLAY")
        self.xvfb = None
        self.chromium = None
        self.chromedriver = None
        self.wd = None
        self.typed_at = 0.0

    def start(self) -> None:
        if self.own_display:
            self.xvfb = subprocess.Popen(
                ["Xvfb", self.display, "-screen", "0", "1280x1024x24", "-nolisten", "tcp"],
                stdin=subprocess.DEVNULL, stdout=open(os.path.join(self.work, "xvfb.log"), "w"),
                stderr=subprocess.STDOUT)
        self.env = dict(os.environ, DISPLAY=self.display)
        port = free_port()
        self.chromedriver = subprocess.Popen(
            [shutil.which("chromedriver") or "/usr/bin/chromedriver", f"--port={port}",
             f"--log-path={os.path.join(self.work, 'chromedriver.log')}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env)
        self.wd = WebDriver(port)
        self.driver_port = port  # for a client of its own (webdriver_intermediary.py)
        deadline = time.monotonic() + 180
        while True:
            try:
                if self.wd.call("GET", "/status", timeout=5).get("ready"):
                    break
            except Exception:  # noqa: BLE001 - not up yet
                pass
            if time.monotonic() > deadline or self.chromedriver.poll() is not None:
                raise RuntimeError("chromedriver did not become ready")
            time.sleep(0.2)

        # Chromium is started here and chromedriver attaches to it (debuggerAddress):
        # chromedriver gives a Chromium it starts 60 s to come up, and under TCG on a
        # busy host a cold Chromium takes longer. An app window (--app): no tab strip,
        # toolbar or omnibox, whose WebUI costs minutes under TCG; the network service
        # in the browser process: a child that cannot connect within 15 s exits.
        devtools = self.devtools = free_port()
        chromium_args = [
            shutil.which("chromium") or "/usr/bin/chromium",
            "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--no-default-browser-check", "--password-store=basic", "--window-position=0,0",
            "--window-size=800,600", "--disable-extensions", "--disable-component-update",
            "--disable-background-networking", "--disable-sync", "--mute-audio",
            "--disable-backgrounding-occluded-windows", "--disable-renderer-backgrounding",
            "--disable-background-timer-throttling", "--enable-features=NetworkServiceInProcess2",
            f"--remote-debugging-port={devtools}", f"--user-data-dir={self.work}/profile",
            "--enable-logging", f"--log-file={self.args.browser_log}",
            # FIDO_LOG lines reach the log through device_event_log_impl.cc's VLOG(1)
            "--v=0", "--vmodule=*/device/fido/*=2,*/webauthn/*=2,device_event_log_impl=1",
            *os.environ.get("LK_CHROMIUM_ARGS", "").split(), f"--app={self.url}"]
        t0 = time.monotonic()
        self.chromium = subprocess.Popen(
            chromium_args, stdin=subprocess.DEVNULL, stdout=open(os.path.join(self.work, "chromium.out"), "w"),
            stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + 600
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{devtools}/json/version", timeout=10) as r:
                    version = json.load(r).get("Browser")
                break
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline or self.chromium.poll() is not None:
                raise RuntimeError(f"Chromium's DevTools port did not answer (exit status {self.chromium.poll()})")
            time.sleep(0.5)
        log(f"{version} up in {time.monotonic() - t0:.1f} s")
        t0 = time.monotonic()
        value = self.wd.call("POST", "/session", {"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "unhandledPromptBehavior": "ignore",
            "goog:chromeOptions": {"debuggerAddress": f"127.0.0.1:{devtools}"}}}}, timeout=600)
        self.wd.session = value["sessionId"]
        log(f"chromium {value.get('capabilities', {}).get('browserVersion')} session in "
            f"{time.monotonic() - t0:.1f} s")
        self.wd.call("POST", f"/session/{self.wd.session}/timeouts", {"script": 30000})
        self.reload()
        ua, ok = self.run_script(PROBE)
        log(f"page {self.url}: {ua}; secure context with WebAuthn JSON: {ok}")
        if not ok:
            raise RuntimeError("the page has no navigator.credentials or parseCreationOptionsFromJSON")

    def run_script(self, script: str, *args):
        return self.wd.run(script, *args)

    def reload(self) -> None:
        t0 = time.monotonic()
        self.wd.call("POST", f"/session/{self.wd.session}/url", {"url": self.url}, timeout=600)
        log(f"page loaded in {time.monotonic() - t0:.1f} s")

    def xdotool(self, *args: str) -> None:
        subprocess.run(["xdotool", *args], env=self.env, check=True, timeout=20,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def begin_request(self, pin: str | None) -> None:
        self.started = time.monotonic()
        self.typed_at = 0.0
        self.typed = 0

    def answer_prompts(self, pin: str | None, lines: list[str]) -> None:
        asked = sum(1 for line in lines if PIN_COLLECTION.search(line))
        taken = sum(1 for line in lines if PIN_TAKEN.search(line))
        now = time.monotonic()
        if pin is None:
            self.pin_prompts = asked  # counted: the cell fails on it
            return
        if asked == 0 and (taken or now - self.started < PIN_BLIND_AFTER):
            return
        # a busy TCG guest can take 15 s from Return to getPinToken: wait that long before
        # a second try, which would otherwise type into whatever shows next
        if taken >= max(asked, 1) or now - self.typed_at < 25:
            return
        if self.typed == 0:
            self.pin_prompts += 1
            time.sleep(1.5)  # the sheet's field takes focus once it is drawn
        self.type_pin(pin)
        self.typed += 1
        self.typed_at = time.monotonic()
        log(f"typed the PIN into Chromium's window (try {self.typed}; the log showed {asked} PIN collection(s))")

    def type_pin(self, pin: str) -> None:
        """As a person would: select what the field holds, type the PIN, press Return."""
        self.xdotool("key", "--clearmodifiers", "ctrl+a")
        self.xdotool("type", "--delay", "40", pin)
        self.xdotool("key", "Return")

    def screenshot(self, name: str) -> None:
        if not shutil.which("xwd"):  # an image without x11-apps
            return
        path = os.path.join(self.args.work, f"{name}.xwd")
        subprocess.run(["xwd", "-root", "-silent", "-out", path], env=self.env, timeout=30,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        log(f"screenshot of the display: {path}")

    def close(self) -> None:
        if self.wd and self.wd.session:
            try:
                self.wd.call("DELETE", f"/session/{self.wd.session}", timeout=60)
            except Exception as e:  # noqa: BLE001
                log(f"closing the session: {e}")
        for proc in (self.chromium, self.chromedriver, self.xvfb):
            if proc is None:
                continue
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.work, ignore_errors=True)
