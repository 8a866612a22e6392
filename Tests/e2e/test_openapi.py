"""docs/control-api.openapi.yaml against the running daemon: the file is valid OpenAPI 3.1,
its operations are exactly the routes the daemon registered (GET /v1/api/routes), and a
short tour calls the endpoints no other test calls, so that test_zz_openapi.py (last of
the session) can check that every documented operation answered as documented.
"""

from __future__ import annotations

import json
import re
import socket

from openapi_spec_validator import OpenAPIV31SpecValidator

import openapi_spec
from openapi_spec import Operation


def test_the_spec_is_valid_openapi_3_1():
    spec = openapi_spec.spec()
    assert spec["openapi"].startswith("3.1."), spec["openapi"]
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in OpenAPIV31SpecValidator(spec).iter_errors()]
    assert not errors, "\n".join(errors)


def test_every_operation_has_an_id_a_success_and_error_documents():
    spec = openapi_spec.spec()
    ids = []
    for operation in sorted(openapi_spec.operations(), key=str):
        item = spec["paths"][operation.path][operation.method.lower()]
        ids.append(item.get("operationId"))
        assert item.get("operationId"), f"{operation}: no operationId"
        assert "default" in item["responses"], f"{operation}: no default (the HTTP layer's errors)"
        statuses = [int(s) for s in item["responses"] if s != "default"]
        assert any(200 <= s < 300 for s in statuses), f"{operation}: no 2xx response"
        if "{" in operation.path:
            assert 400 in statuses, f"{operation}: a bad path parameter is a 400"
        for status in [s for s in statuses if s >= 400] + ["default"]:
            found, _ = openapi_spec.response(operation, 599 if status == "default" else status)
            schema = found["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/Error"}, f"{operation} {status}: not the error document"
        assert ("requestBody" in item) == (413 in statuses), f"{operation}: 413 goes with a request body"
    assert len(ids) == len(set(ids)), "operationIds repeat"


def test_the_spec_examples_conform_to_their_schemas():
    """An example that breaks its own schema misleads whoever copies it."""
    spec = openapi_spec.spec()
    problems = []

    def check(schema_at: tuple[str, ...], example, where: str):
        validator = openapi_spec.validator_at(*schema_at)
        problems.extend(f"{where}: {e.message}" for e in validator.iter_errors(example))

    for name, schema in spec["components"]["schemas"].items():
        if "example" in schema:
            check(("components", "schemas", name), schema["example"], f"schema {name}")
    for operation in openapi_spec.operations():
        item = spec["paths"][operation.path][operation.method.lower()]
        bodies = [(("requestBody",), item.get("requestBody", {}))]
        bodies += [(("responses", status), response) for status, response in item["responses"].items()]
        for where, body in bodies:
            for media_type, content in body.get("content", {}).items():
                if "example" in content and "schema" in content:
                    check(("paths", operation.path, operation.method.lower(), *where, "content", media_type,
                           "schema"), content["example"], f"{operation} {'/'.join(where)}")
    for name, response in spec["components"]["responses"].items():
        for media_type, content in response.get("content", {}).items():
            if "example" in content:
                check(("components", "responses", name, "content", media_type, "schema"), content["example"],
                      f"response {name}")
    assert not problems, "\n".join(problems)


def test_the_spec_documents_exactly_the_routes_the_daemon_serves(control):
    routes = control.get("/v1/api/routes")
    served = {Operation(route["method"], route["path"]) for route in routes}
    documented = openapi_spec.operations()
    assert not served - documented, f"served but not in the spec: {sorted(map(str, served - documented))}"
    assert not documented - served, f"in the spec but not served: {sorted(map(str, documented - served))}"
    assert routes == sorted(routes, key=lambda r: (r["path"], r["method"])), "the listing is not sorted"
    assert control.get("/v1/status")["version"] == openapi_spec.spec()["info"]["version"], \
        "info.version is the daemon's version (LatchkeyVersion.string)"


# The pages that hold the control API's curl examples: the API itself, and its CI routes.
CURL_EXAMPLE_PAGES = ("docs/control-api.md", "docs/automation.md")


def docs_curl_operations() -> set[Operation]:
    """The operations of the curl examples in CURL_EXAMPLE_PAGES (continuation lines joined)."""
    repo = openapi_spec.SPEC_PATH.parents[1]
    text = "\n".join((repo / page).read_text(encoding="utf-8") for page in CURL_EXAMPLE_PAGES).replace("\\\n", " ")
    found = set()
    for line in text.splitlines():
        if "curl --unix-socket" not in line:
            continue
        command = line[line.index("curl --unix-socket"):]
        url = re.search(r"http://[^/\s'\"]+(/[^\s'\"]*)", command)
        method = re.search(r"-X\s+([A-Z]+)", command)
        verb = method.group(1) if method else ("POST" if re.search(r"\s(-d|--data)\b", command) else "GET")
        if url and (operation := openapi_spec.operation_for(verb, url.group(1))):
            found.add(operation)
    return found


def test_the_docs_have_a_curl_example_for_every_operation():
    missing = openapi_spec.operations() - docs_curl_operations()
    assert not missing, f"no curl example in {' or '.join(CURL_EXAMPLE_PAGES)}: {sorted(map(str, missing))}"


def test_the_event_stream_as_documented(control, make_key, events):
    """GET /v1/events is text/event-stream, not JSON, so it gets a direct look: the head the
    spec documents, events that are Events, and the error document for a bad key name."""
    operation = Operation("GET", "/v1/events")
    documented, _ = openapi_spec.response(operation, 200)
    stream = events("openapi-tour")
    assert stream.headers["content-type"].split(";")[0] in documented["content"], stream.headers
    for name, header in documented.get("headers", {}).items():
        value = stream.headers.get(name.lower())
        assert value is not None and openapi_spec.Draft202012Validator(header["schema"]).is_valid(value), \
            f"{name}: {value!r}"
    make_key(name="openapi-tour")
    created = stream.next("key.created", key="openapi-tour")
    assert not list(openapi_spec.schema_validator("Event").iter_errors(created)), created
    status, body = control.request("GET", "/v1/events?key=not%20a%20key", expect=None)
    assert status == 400 and body["error"]["code"] == "bad_request", body


def test_the_event_stream_example_holds_events():
    example = openapi_spec.spec()["paths"]["/v1/events"]["get"]["responses"]["200"]["content"][
        "text/event-stream"]["example"]
    data = [json.loads(line[5:]) for line in example.splitlines() if line.startswith("data:")]
    assert data, "the example has no data line"
    for event in data:
        assert not list(openapi_spec.schema_validator("Event").iter_errors(event)), event


def test_an_oversized_body_is_a_413_document_then_close(control):
    """The HTTP layer's answers are error documents too; an oversized body's closes the connection."""
    operation = Operation("POST", "/v1/keys")
    documented, _ = openapi_spec.response(operation, 413)
    assert documented["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
    # The daemon answers as soon as it reads a Content-Length over the limit and closes;
    # a body still unsent then would meet a closed socket (and Linux drops the answer of
    # a Unix socket closed with unread bytes), so only the head goes out, as a client that
    # waits for "100 Continue" would send it.
    body = json.dumps({"name": "x" * (64 * 1024)}).encode()
    head = (f"POST {operation.path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(control.timeout)
        sock.connect(control.path)
        sock.sendall(head)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head_bytes, _, payload = raw.partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    assert status == 413 and headers.get("connection") == "close", raw[:200]
    document = json.loads(payload[: int(headers["content-length"])])
    assert document["error"]["code"] == "too_large", document
    assert not list(openapi_spec.schema_validator("Error").iter_errors(document))
