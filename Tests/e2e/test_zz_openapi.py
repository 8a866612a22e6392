"""Runs after every other e2e test (pytest collects files in name order): every control-API
response any test received through conftest's ControlClient must conform to
docs/control-api.openapi.yaml (the schema of its operation and status, its documented
headers), so must every request body the server accepted, every event an `events` stream read must be an Event, and every documented
operation must have answered some test with success.
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


def test_this_file_runs_after_every_other_e2e_test(request):
    e2e = [Path(item.path) for item in request.session.items if Path(item.path).parent == E2E_DIR]
    first = e2e.index(Path(__file__))
    assert all(path == Path(__file__) for path in e2e[first:]), \
        "test_zz_openapi.py must run after every other e2e test: it checks what they recorded"


def test_every_recorded_response_conforms_to_the_spec():
    if not CONTROL_LOG:  # run alone; with the suite, the coverage check below notices a silent recorder
        pytest.skip("no control-API exchange was recorded: run it after the other e2e tests")
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
        if 200 <= entry["status"] < 300:
            problems += [f"{where} ({operation}): {error}"
                         for error in openapi_spec.request_errors(operation, entry["request"])]
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
