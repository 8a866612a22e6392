"""Firefox ESR (Debian's firefox-esr), headless, driven over Marionette with PyPI's
marionette_driver (Debian has no geckodriver; Marionette is Firefox's own remote
protocol, which geckodriver only translates).

Firefox runs with a fresh profile and `--remote-allow-system-access`, so that the test
may run scripts in the browser's chrome. Its WebAuthn PIN prompt is browser chrome:
WebAuthnPromptHelper answers the "pin-required" notification of its WebAuthn
service with Services.prompt.promptPasswordBC, a tab-modal commonDialog. The test
installs, in the chrome, an observer of "common-dialog-loaded" that finds that
dialog, types the cell's PIN into its password field and presses its OK button,
as a person would; the WebDriver "send alert text" command cannot do it (Marionette
supports it for prompt(), and dismisses a password prompt instead). A PIN dialog on
a key that should need none, or one saying the PIN was wrong, is cancelled and
counted, so that the cell fails at once rather than at its timeout.

Direct attestation would ask the person with a doorhanger; the profile sets
security.webauthn.always_allow_direct_attestation, which answers it as "allow".
Firefox's WebAuthn code is Rust (authenticator-rs): RUST_LOG makes it log on stderr,
which goes to the browser log with the rest of Firefox's output.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time

from marionette_driver.errors import UnexpectedAlertOpen
from marionette_driver.marionette import Marionette

from common import PROBE, Browser, log

PREFS = {
    "security.webauthn.always_allow_direct_attestation": True,
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.page": 0,
    "browser.startup.homepage_override.mstone": "ignore",
    "browser.aboutwelcome.enabled": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "toolkit.telemetry.reportingpolicy.firstRun": False,
    "app.update.disabledForTesting": True,
}

# Chrome-context script: installs (once) the observer that answers the WebAuthn PIN
# dialog, and sets the PIN for the next request (null: no PIN dialog may appear).
# window is the browser window; its lkState outlives the script.
ARM = """
const [pin] = arguments;
if (!window.lkState) {
  const state = window.lkState = {pin: null, answered: 0, refused: 0, seen: []};
  const l10n = new Localization(["toolkit/webauthnDialog.ftl"], true);
  const pinRequired = l10n.formatValueSync("webauthn-pin-required-prompt");
  window.lkObserver = {
    observe(subject, topic, data) {
      if (topic === "webauthn-prompt") {
        try { state.seen.push(JSON.parse(data).prompt.type); } catch (e) { state.seen.push("?"); }
        return;
      }
      const dialog = subject.Dialog;  // common-dialog-loaded: subject is the dialog's window
      if (!dialog || dialog.args.promptType !== "promptPassword") return;
      subject.setTimeout(() => {
        if (state.pin !== null && dialog.args.text === pinRequired) {
          dialog.ui.password1Textbox.focus();
          dialog.ui.password1Textbox.value = state.pin;
          state.answered++;
          dialog.ui.button0.click();
        } else {
          state.refused++;
          state.seen.push("refused PIN dialog: " + dialog.args.text);
          dialog.ui.button1.click();
        }
      }, 0);
    },
  };
  Services.obs.addObserver(window.lkObserver, "webauthn-prompt");
  Services.obs.addObserver(window.lkObserver, "common-dialog-loaded");
}
Object.assign(window.lkState, {pin, answered: 0, refused: 0, seen: []});
"""
STATE = "return window.lkState"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Firefox(Browser):
    name = "firefox"

    def __init__(self, args, url: str):
        super().__init__(args, url)
        self.profile = tempfile.mkdtemp(prefix="lk-firefox-", dir=args.work)
        self.port = free_port()
        self.proc = None
        self.m = None
        self.state = {}

    def start(self) -> None:
        prefs = dict(PREFS, **{"marionette.port": self.port})
        with open(os.path.join(self.profile, "user.js"), "w") as f:
            for k, v in prefs.items():
                f.write(f'user_pref("{k}", {str(v).lower() if isinstance(v, bool) else repr(v)});\n')
        env = dict(os.environ, RUST_LOG="authenticator=debug,authrs_bridge=debug",
                   MOZ_LOG="WebAuthnHandler:5", MOZ_CRASHREPORTER_DISABLE="1")
        binary = shutil.which("firefox-esr") or "firefox-esr"
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [binary, "--headless", "--marionette", "--remote-allow-system-access", "--no-remote",
             "--profile", self.profile, "about:blank"],
            stdin=subprocess.DEVNULL, stdout=open(self.args.browser_log, "ab"), stderr=subprocess.STDOUT, env=env)
        # under TCG on a busy host a cold Firefox takes minutes to listen, and as long
        # again to open its first window (which the new session waits for)
        self.m = Marionette(host="127.0.0.1", port=self.port, socket_timeout=600, startup_timeout=600)
        caps = self.m.start_session(capabilities={"unhandledPromptBehavior": "ignore"})
        log(f"firefox {caps.get('browserVersion')} Marionette session in {time.monotonic() - t0:.1f} s")
        t0 = time.monotonic()
        self.m.navigate(self.url)
        log(f"page loaded in {time.monotonic() - t0:.1f} s")
        ua, ok = self.run_script(PROBE)
        log(f"page {self.url}: {ua}; secure context with WebAuthn JSON: {ok}")
        if not ok:
            raise RuntimeError("the page has no navigator.credentials or parseCreationOptionsFromJSON")
        with self.m.using_context(self.m.CONTEXT_CHROME):
            self.m.execute_script(ARM, script_args=[None], sandbox=None, new_sandbox=False)

    def run_script(self, script: str, *args):
        try:
            return self.m.execute_script(script, script_args=list(args), sandbox=None, new_sandbox=False)
        except UnexpectedAlertOpen:
            return None  # the PIN dialog is open; the observer answers it

    def begin_request(self, pin: str | None) -> None:
        with self.m.using_context(self.m.CONTEXT_CHROME):
            self.m.execute_script(ARM, script_args=[pin], sandbox=None, new_sandbox=False)

    def request(self, options: dict, kind: str, pin: str | None) -> dict:
        try:
            return super().request(options, kind, pin)
        finally:
            with self.m.using_context(self.m.CONTEXT_CHROME):
                self.state = self.run_script(STATE) or {}
            self.pin_prompts = self.state.get("answered", 0) + self.state.get("refused", 0)
            log(f"firefox prompts during the request: {self.state.get('seen')}")

    def reload(self) -> None:
        self.m.navigate(self.url)

    def close(self) -> None:
        if self.m and self.m.session_id:
            try:
                self.m.delete_session()
            except Exception as e:  # noqa: BLE001
                log(f"closing the Marionette session: {e}")
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
