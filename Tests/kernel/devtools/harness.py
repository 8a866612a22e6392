#!/usr/bin/env python3
"""What the devtools suite's browsers need, in the rig guest (devtools-checks.sh): an X
display, Debian's Chromium with --remote-debugging-port, and latchkey-webdriver --devtools
in front of it, each run as a test account (a browser and its gateway are one account's:
docs/automation.md, "Parallel tests"); the page the tests sign in on; and the relying party
(python-fido2's Fido2Server).

    harness.py browser --account lk-w0 --display 11 [--isolation off]
        starts Xvfb, Chromium and the gateway, prints "READY CHROMIUM_PORT GATEWAY_PORT",
        and stops them all on SIGTERM or when stdin closes

The paths come from the environment devtools-checks.sh sets: LK_BIN (latchkey-webdriver,
latchkeyctl), LK_LIB (the Swift runtime), LK_SOCKET (latchkeyd's control socket), LK_WORK.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "browsers"))
import common  # noqa: E402  (the browser matrix's page)

# navigator.credentials in the page: WebAuthn JSON in, the credential's JSON (or the
# error's name and message) out. A request the browser leaves pending (an error dialog
# nobody dismisses) counts as failed after `ms`.
WEBAUTHN = """
async ([kind, json, ms]) => {
  const publicKey = kind === "create" ? PublicKeyCredential.parseCreationOptionsFromJSON(json)
                                      : PublicKeyCredential.parseRequestOptionsFromJSON(json);
  const request = kind === "create" ? navigator.credentials.create({publicKey})
                                    : navigator.credentials.get({publicKey});
  const late = new Promise((_, reject) => setTimeout(() => reject(new Error("no answer within " + ms + " ms")), ms));
  try {
    const credential = await Promise.race([request, late]);
    return {ok: true, credential: credential.toJSON()};
  } catch (e) {
    return {ok: false, error: e.name + ": " + e.message};
  }
}
"""


def log(*args) -> None:
    print("#", *args, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_account(account: str) -> list[str]:
    entry = pwd.getpwnam(account)
    return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups", "--"]


def home(account: str) -> str:
    path = f"/tmp/home-{account}"
    entry = pwd.getpwnam(account)
    os.makedirs(path, exist_ok=True)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    os.chmod(path, 0o700)
    return path


def ctl(*argv: str, account: str | None = None) -> tuple[int, object]:
    """latchkeyctl --json ARGV (as `account`, else root): (exit status, parsed output)."""
    command = [os.path.join(os.environ["LK_BIN"], "latchkeyctl"), "--socket", os.environ["LK_SOCKET"], "--json", *argv]
    if account:
        command = as_account(account) + ["env", f"LD_LIBRARY_PATH={os.environ['LK_LIB']}"] + command
    out = subprocess.run(command, capture_output=True, text=True, timeout=30,
                         env=dict(os.environ, LD_LIBRARY_PATH=os.environ["LK_LIB"]))
    try:
        return out.returncode, json.loads(out.stdout) if out.stdout.strip() else None
    except ValueError:
        return out.returncode, out.stdout


def wait_http(url: str, seconds: float, proc: subprocess.Popen, what: str) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.load(response)
        except (OSError, ValueError):
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer {url} within {seconds} s")
        time.sleep(0.5)


def wait_port(port: int, seconds: float, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited with {proc.returncode}") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not listen within {seconds} s") from None
            time.sleep(0.2)


class Browser:
    """Xvfb, Chromium as `account` with its debugging port, and (gateway=True) the
    account's latchkey-webdriver --devtools in front of it."""

    def __init__(self, account: str, display: int, gateway: bool = True, isolation: str = "account"):
        self.account = account
        self.display = f":{display}"
        self.work = os.path.join(os.environ.get("LK_WORK", "/tmp"), f"browser-{account}-{display}")
        os.makedirs(self.work, exist_ok=True)
        entry = pwd.getpwnam(account)
        os.chown(self.work, entry.pw_uid, entry.pw_gid)
        self.procs: list[subprocess.Popen] = []
        self.gateway_wanted = gateway
        self.isolation = isolation
        self.chromium_port = 0
        self.gateway_port = 0
        self.log = os.path.join(self.work, "chromium.log")

    def start(self) -> "Browser":
        t0 = time.monotonic()
        self.procs.append(subprocess.Popen(
            ["Xvfb", self.display, "-screen", "0", "1024x768x24", "-nolisten", "tcp", "-ac"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self.chromium_port = free_port()
        env = {"PATH": "/usr/bin:/bin", "HOME": home(self.account), "DISPLAY": self.display, "LANG": "C.UTF-8"}
        chromium = self.spawn(
            ["chromium", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--no-default-browser-check", "--password-store=basic", "--window-position=0,0",
             "--window-size=800,600", "--disable-extensions", "--disable-component-update",
             "--disable-background-networking", "--disable-sync", "--mute-audio",
             "--disable-backgrounding-occluded-windows", "--disable-renderer-backgrounding",
             "--disable-background-timer-throttling", "--enable-features=NetworkServiceInProcess2",
             f"--remote-debugging-port={self.chromium_port}", f"--user-data-dir={self.work}/profile",
             "--enable-logging", f"--log-file={self.log}", "--v=0",
             "--vmodule=*/device/fido/*=2,*/webauthn/*=2,device_event_log_impl=1", "about:blank"],
            env, os.path.join(self.work, "chromium.out"))
        version = wait_http(f"http://127.0.0.1:{self.chromium_port}/json/version", 600, chromium, "Chromium")
        log(f"{self.account}: {version.get('Browser')} on port {self.chromium_port} after {time.monotonic() - t0:.1f} s")
        if self.gateway_wanted:
            self.gateway_port = free_port()
            gateway = self.spawn(
                ["env", f"LD_LIBRARY_PATH={os.environ['LK_LIB']}",
                 os.path.join(os.environ["LK_BIN"], "latchkey-webdriver"), "--devtools",
                 "--port", str(self.gateway_port), "--upstream", f"http://127.0.0.1:{self.chromium_port}",
                 "--socket", os.environ["LK_SOCKET"], "--isolation", self.isolation, "--log-level", "debug"],
                {"PATH": "/usr/bin:/bin", "HOME": env["HOME"]}, os.path.join(self.work, "gateway.log"))
            wait_port(self.gateway_port, 60, gateway, "latchkey-webdriver --devtools")
        return self

    def spawn(self, argv: list[str], env: dict, log_path: str) -> subprocess.Popen:
        proc = subprocess.Popen(as_account(self.account) + argv, env=env, stdin=subprocess.DEVNULL,
                                stdout=open(log_path, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    @property
    def cdp_url(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port or self.chromium_port}"

    def stop(self) -> int | None:
        """Stops everything, the gateway first; its exit status (None without one)."""
        status = None
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(5)
            if self.gateway_wanted and proc is self.procs[-1]:
                status = proc.returncode
        return status

    def tail(self, name: str, lines: int = 30) -> list[str]:
        try:
            with open(os.path.join(self.work, name), errors="replace") as f:
                return f.read().splitlines()[-lines:]
        except OSError:
            return []


def serve_page() -> int:
    """The browser matrix's page (browsers/common.py) on 127.0.0.1; its port. Any name
    under localhost reaches it: http://localhost:PORT, http://w0.localhost:PORT."""
    server, _ = common.serve_page()
    return server.server_address[1]


def webauthn(page, kind: str, options, ms: int = 60000) -> dict:
    """navigator.credentials.create()/get() in `page` with python-fido2's options."""
    public_key = json.loads(json.dumps(dict(options)["publicKey"]))
    public_key["timeout"] = ms
    return page.evaluate(WEBAUTHN, [kind, public_key, ms + 15000])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["browser"])
    ap.add_argument("--account", required=True)
    ap.add_argument("--display", type=int, required=True)
    ap.add_argument("--isolation", default="account")
    ap.add_argument("--no-gateway", action="store_true")
    args = ap.parse_args()
    browser = Browser(args.account, args.display, not args.no_gateway, args.isolation)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        browser.start()
        print(f"READY {browser.chromium_port} {browser.gateway_port}", flush=True)
        threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
        stop.wait()
    except Exception as e:  # noqa: BLE001
        print(f"FAILED {e}", flush=True)
        for line in browser.tail("chromium.out") + browser.tail("gateway.log"):
            log("  |", line[:300])
    finally:
        status = browser.stop()
        print(f"STOPPED gateway exit {status}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
