"""docs/control-api.openapi.yaml for the tests: its operations, the operation a request
path falls under, and a JSON Schema validator for an operation's response.

The schemas are JSON Schema 2020-12 (OpenAPI 3.1's dialect), so `jsonschema` checks a
response body against them directly; `$ref`s resolve inside the whole spec document.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_PATH = Path(__file__).resolve().parents[2] / "docs" / "control-api.openapi.yaml"
SPEC_URI = "urn:latchkey:control-api"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


@dataclass(frozen=True)
class Operation:
    method: str  # upper case, as on the wire
    path: str  # the template: /v1/keys/{name}

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


@functools.cache
def spec() -> dict:
    with open(SPEC_PATH, encoding="utf-8") as f:
        return yaml.safe_load(f)


def operations() -> set[Operation]:
    return {Operation(method.upper(), path)
            for path, item in spec()["paths"].items() for method in METHODS if method in item}


@functools.cache
def _templates() -> list[tuple[re.Pattern, str]]:
    compiled = []
    for path in spec()["paths"]:
        pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path))
        compiled.append((re.compile(f"^{pattern}$"), path))
    # Where two templates match, the one with more literal segments wins.
    compiled.sort(key=lambda item: -sum(1 for part in item[1].split("/") if part and not part.startswith("{")))
    return compiled


def operation_for(method: str, url: str) -> Operation | None:
    """The documented operation a request falls under; None for a path or method the spec lacks."""
    path = urlsplit(url).path
    for pattern, template in _templates():
        if pattern.match(path):
            if method.lower() in spec()["paths"][template]:
                return Operation(method.upper(), template)
            return None
    return None


def _pointer(*parts: str) -> str:
    return "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)


@functools.cache
def _registry() -> Registry:
    return Registry().with_resource(SPEC_URI, Resource.from_contents(spec(), default_specification=DRAFT202012))


def response(operation: Operation, status: int) -> tuple[dict, tuple[str, ...]] | None:
    """The spec's response object for `status` (or its `4XX` range, or `default`) and where it is in
    the spec; None when the spec does not document that status."""
    responses = spec()["paths"][operation.path][operation.method.lower()]["responses"]
    key = next((k for k in (str(status), f"{status // 100}XX", "default") if k in responses), None)
    if key is None:
        return None
    found = responses[key]
    if "$ref" in found:
        ref = found["$ref"]
        assert ref.startswith("#/components/responses/"), ref
        name = ref.rsplit("/", 1)[1]
        return spec()["components"]["responses"][name], ("components", "responses", name)
    return found, ("paths", operation.path, operation.method.lower(), "responses", key)


@functools.cache
def validator(operation: Operation, status: int, media_type: str = "application/json") -> Draft202012Validator | None:
    """A validator for the body of `operation`'s `status` response; None when that response has no body."""
    found, where = response(operation, status)
    if media_type not in found.get("content", {}):
        return None
    return validator_at(*where, "content", media_type, "schema")


def schema_errors(operation: Operation, status: int, body, media_type: str = "application/json") -> list[str]:
    """Every way `body` breaks the schema of `operation`'s `status` response (empty: it conforms)."""
    if response(operation, status) is None:
        return [f"the spec documents no {status} response for {operation}"]
    found = validator(operation, status, media_type)
    if found is None:
        return [] if body is None else [f"the spec gives {operation} {status} no {media_type} body; one came"]
    if body is None:
        return [f"the spec gives {operation} {status} a {media_type} body; none came"]
    return [f"{'/'.join(map(str, e.absolute_path)) or '(the body)'}: {e.message}"
            for e in sorted(found.iter_errors(body), key=lambda e: list(map(str, e.absolute_path)))]


def schema_validator(name: str) -> Draft202012Validator:
    """A validator for components/schemas/`name`."""
    return validator_at("components", "schemas", name)


@functools.cache
def validator_at(*where: str) -> Draft202012Validator:
    """A validator for the schema at `where` in the spec (JSON Pointer parts, unescaped)."""
    return Draft202012Validator({"$ref": f"{SPEC_URI}#/{_pointer(*where)}"}, registry=_registry(),
                                format_checker=FormatChecker())


def request_errors(operation: Operation, body) -> list[str]:
    """Every way a request `body` the server accepted breaks the spec's requestBody schema: a spec that
    demands more than the server does misleads clients."""
    item = spec()["paths"][operation.path][operation.method.lower()]
    if "requestBody" not in item:
        return [] if body is None else [f"the spec gives {operation} no request body; one was accepted"]
    if body is None:
        return [] if not item["requestBody"].get("required") else [f"{operation} accepted no body; the spec needs one"]
    found = validator_at("paths", operation.path, operation.method.lower(), "requestBody", "content",
                         "application/json", "schema")
    return [f"request {'/'.join(map(str, e.absolute_path)) or '(the body)'}: {e.message}"
            for e in found.iter_errors(body)]
