"""What both browser drivers of the matrix share: the page on http://localhost,
the script that starts a WebAuthn request in it, a browser's log read step by step,
and the result lines.

A browser driver (chromium.py, firefox.py) is a `Browser`: it starts the browser
with a fresh profile, loads the page, and for each request starts it in the page,
answers the browser's PIN prompt when the cell has a PIN, and polls the page for
the outcome (a headless browser keeps a WebAuthn promise pending after the only
key answered an error, so nothing awaits the promise).
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import sys
import threading
import time
import traceback

PAGE = b"""<!doctype html><html><head><title>latchkey browser matrix</title></head>
<body><p>latchkey: WebAuthn through the kernel's hidraw</p></body></html>"""

# arguments[0]: the options as WebAuthn JSON, arguments[1]: "create" or "get".
# The outcome goes to window.lkResult: {state: pending|ok|error, credential, error, ms}.
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
RESULT = "return window.lkResult || {state: 'none'}"
PROBE = ("return [navigator.userAgent, window.isSecureContext && !!navigator.credentials"
         " && !!PublicKeyCredential.parseCreationOptionsFromJSON]")


def log(*args) -> None:
    print("#", *args, file=sys.stderr, flush=True)


def say(line: str) -> None:
    print(line, flush=True)


def fail_line(name: str, error) -> None:
    """FAIL<TAB>name<TAB>why on stdout; an exception's traceback goes to stderr."""
    if isinstance(error, BaseException):
        if not isinstance(error, AssertionError):
            for line in traceback.format_exception(error):
                for part in line.rstrip().splitlines():
                    log("   ", part)
        error = f"{type(error).__name__}: {error}"
    say(f"FAIL\t{name}\t{error}".replace("\n", " ")[:800])


class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *a):
        pass


def serve_page() -> tuple[http.server.ThreadingHTTPServer, str]:
    """The page on 127.0.0.1 (a free port), reached as http://localhost: a secure context."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://localhost:{server.server_address[1]}/"


def open_page(ap: argparse.ArgumentParser, make_browser):
    """What every browser check starts with: the options they all take (the browser's
    log, the WebAuthn timeout, the work directory) added to ap and the command line
    parsed, the page served, and the browser make_browser(args, url) makes.
    Returns (args, server, url, browser)."""
    ap.add_argument("--browser-log", required=True, help="the browser's own log (FIDO/WebAuthn lines)")
    ap.add_argument("--timeout-ms", type=int, default=60000, help="WebAuthn timeout of each request")
    ap.add_argument("--work", default="/tmp", help="profiles and logs go under this directory")
    args = ap.parse_args()
    server, url = serve_page()
    return args, server, url, make_browser(args, url)


class LogFile:
    """A log file some process appends to, read from a mark: the lines of one step."""

    def __init__(self, path: str):
        self.path = path

    def mark(self) -> int:
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0

    def since(self, mark: int) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(mark)
                return f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return []


class RequestFailed(AssertionError):
    """A WebAuthn request that did not give a credential; carries the browser's log."""


class Browser:
    """One browser session; subclasses start it and drive its page and prompts."""

    name = "browser"

    def __init__(self, args, url: str):
        self.args = args
        self.url = url
        self.log = LogFile(args.browser_log)
        self.pin_prompts = 0  # PIN prompts answered during the current request

    # ---- for subclasses --------------------------------------------------------
    def start(self) -> None:
        raise NotImplementedError

    def run_script(self, script: str, *args):
        """Runs script in the page; None while a browser prompt blocks the page's scripts."""
        raise NotImplementedError

    def reload(self) -> None:
        """Loads the page again, which ends a request still pending."""
        raise NotImplementedError

    def answer_prompts(self, pin: str | None, lines: list[str]) -> None:
        """Called while a request is pending, with the browser's log lines of the step so far."""

    def begin_request(self, pin: str | None) -> None:
        """Called before a request starts."""

    def screenshot(self, name: str) -> None:
        """Keeps a picture of the browser's window (when it has one) for a failed step."""

    def close(self) -> None:
        raise NotImplementedError

    # ---- shared ------------------------------------------------------------------
    def request(self, options: dict, kind: str, pin: str | None) -> dict:
        """navigator.credentials.create()/get() in the page; the PublicKeyCredential's JSON
        and how long it took. Raises RequestFailed with the browser's log of the step."""
        mark = self.begin(options, kind, pin)
        return self.outcome(kind, pin, mark, time.monotonic() + self.args.timeout_ms / 1000 + 20)

    def begin(self, options: dict, kind: str, pin: str | None) -> int:
        """Starts the request in the page; the browser log's mark where its step begins."""
        mark = self.log.mark()
        self.pin_prompts = 0
        self.begin_request(pin)
        self.run_script(START, options, kind)
        return mark

    def outcome(self, kind: str, pin: str | None, mark: int, deadline: float) -> dict:
        """What the request begin() started gave, answering prompts until it ends or the
        monotonic deadline passes; a request that did not give a credential is ended
        (the page reloaded) and raises RequestFailed with the browser's log of the step."""
        result = {"state": "pending"}
        while time.monotonic() < deadline:
            self.answer_prompts(pin, self.log.since(mark))
            got = self.run_script(RESULT)
            if got is not None:
                result = got
                if result.get("state") != "pending":
                    break
            time.sleep(0.3)
        if result.get("state") != "ok":
            lines = self.log.since(mark)
            self.screenshot(f"{self.name}-{kind}-{int(time.time())}")
            self.reload()  # a request left pending would refuse the next one
            raise RequestFailed(f"navigator.credentials.{kind}(): {result.get('error', result.get('state'))}"
                                f" after {result.get('ms', '?')} ms", lines)
        return result


def show_log(lines: list[str], limit: int = 60) -> None:
    """The browser's own log lines of a failed step, as "#" lines after its FAIL line."""
    say(f"#   the browser's log during this step ({len(lines)} lines"
        f"{', the last ' + str(limit) if len(lines) > limit else ''}):")
    for line in lines[-limit:]:
        say(f"#   | {line[:400]}")


def run_step(name: str, fn, log_on_error=None):
    """Runs fn as the cell or check `name`: (True, what fn returned, its seconds), or
    (False, None, None) after the FAIL line. A RequestFailed shows the browser's log it
    carries; any other exception shows log_on_error()'s lines, when given."""
    t = time.monotonic()
    try:
        detail = fn()
    except RequestFailed as e:
        fail_line(name, f"{e.args[0]} ({time.monotonic() - t:.1f} s)")
        show_log(e.args[1])
        return False, None, None
    except Exception as e:  # noqa: BLE001 - every failure is a failed step
        fail_line(name, e)
        if log_on_error is not None:
            show_log(log_on_error())
        return False, None, None
    return True, detail, time.monotonic() - t


def dumps(value) -> str:
    return json.dumps(value, separators=(",", ":"))[:600]
