"""Runs last in the e2e session (pytest collects files in name order): every control-API
response any test received through conftest's ControlClient must conform to
docs/control-api.openapi.yaml (the schema of its operation and status, its documented
headers), and every documented operation must have been called by some test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import openapi_spec
from conftest import CONTROL_LOG, E2E_DIR, EVENT_STREAMS
from openapi_spec import Operation

# Operations the recorded exchanges cannot cover, and why: none. (GET /v1/events is
# recorded by conftest's `events` fixture, its events checked one by one below.)
EXEMPT: dict[Operation, str] = {}


def test_this_file_runs_last_in_its_session(request):
    items = request.session.items
    assert items[-len(_tests()):] == [i for i in items if Path(i.path).name == Path(__file__).name], \
        "test_zz_openapi.py must run after every other test of the session"


def test_every_recorded_response_conforms_to_the_spec():
    assert CONTROL_LOG, "no control-API exchange was recorded"
    problems = []
    for entry in CONTROL_LOG:
        operation = openapi_spec.operation_for(entry["method"], entry["path"])
        where = f"{entry['method']} {entry['path']} -> {entry['status']}"
        if operation is None:
            # An unknown path or method (a test of the router's 404/405) has no document.
            if entry["status"] < 400:
                problems.append(f"{where}: answered, but the spec has no such operation")
            continue
        documented = openapi_spec.response(operation, entry["status"])
        media = entry["media"]
        if media not in (None, "application/json"):
            # A stream (text/event-stream): its type is checked here, its events below.
            if documented is None or media not in documented[0].get("content", {}):
                problems.append(f"{where}: the spec documents no {media} answer")
        else:
            problems += [f"{where} ({operation}): {error}"
                         for error in openapi_spec.schema_errors(operation, entry["status"], entry["body"])]
        if documented is not None:
            headers = {name.lower() for name in entry["headers"]}
            problems += [f"{where}: no {name} header" for name in documented[0].get("headers", {})
                         if name.lower() not in headers]
    unique = list(dict.fromkeys(problems))
    assert not unique, f"{len(unique)} disagreements with the spec:\n" + "\n".join(unique[:60])


def test_every_event_received_conforms_to_the_spec():
    """The data of every server-sent event a test read is an Event (components/schemas/Event)."""
    events = [event for stream in EVENT_STREAMS for event in stream.seen]
    if not events:
        pytest.skip("no test of this session read an event")
    validator = openapi_spec.schema_validator("Event")
    problems = [f"{event}: {error.message}" for event in events for error in validator.iter_errors(event)]
    unique = list(dict.fromkeys(problems))
    assert not unique, f"{len(unique)} events disagree with the spec:\n" + "\n".join(unique[:40])


def test_every_documented_operation_was_exercised(request):
    ran = {Path(item.path).name for item in request.session.items}
    everything = {path.name for path in E2E_DIR.glob("test_*.py")}
    if not everything <= ran:
        pytest.skip(f"only part of the e2e suite ran (not {sorted(everything - ran)[:3]}…): coverage is not judged")
    # Called with success: an operation only ever refused has not shown its answer's shape.
    succeeded = {op for entry in CONTROL_LOG if 200 <= entry["status"] < 300
                 and (op := openapi_spec.operation_for(entry["method"], entry["path"]))}
    missing = openapi_spec.operations() - succeeded - set(EXEMPT)
    assert not missing, f"documented but no test called it successfully: {sorted(map(str, missing))}"
    stale = set(EXEMPT) - openapi_spec.operations()
    assert not stale, f"exempt but not in the spec: {sorted(map(str, stale))}"


def _tests() -> list[str]:
    return [name for name, value in globals().items() if name.startswith("test_") and callable(value)]
