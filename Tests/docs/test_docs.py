"""README.md and docs/*.md held to the tree and to the built programs, so that a fact
the pages state is checked rather than copied:

* the default configuration shown in docs/configuration.md is what
  `latchkeyd --print-default-config` prints;
* every relative link points to a file that exists, and to a heading there when it
  names one;
* every path under scripts/, Tests/, Sources/, docs/ (and the other top-level
  folders) that the pages name exists;
* every `latchkeyctl` command and option, and every `latchkeyd` and
  `latchkey-webdriver` option the pages name, is one the program's own
  description (`--experimental-dump-help`) has; every latchkeyctl command is in
  docs/control-api.md's table and every latchkeyd flag in docs/configuration.md's;
* the environment variables and fuzzers the pages name exist in the code;
* docs/ARCHITECTURE.md's package table names every target of Package.swift, and its
  layout every script; its import table is what each target's sources import, so the
  key core (Sources/LatchkeyCore) is shown importing no NIO and no Hummingbird, and no
  file of the core names an HTTP status; docs/conformance.md's explained skips are the
  device suite plugin's.

    python3 -m pytest -q Tests/docs     # after swift build; LATCHKEYD, LATCHKEYCTL and
                                        # LATCHKEY_WEBDRIVER name the binaries (default
                                        # .build/debug), as for Tests/e2e

Without a binary (and without its variable) the tests that need it are skipped; the
others read files only. The whole module takes well under a second.
"""

from __future__ import annotations

import ast
import difflib
import functools
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]

# Top-level folders whose paths the pages name; a path starting with one of these
# (and not preceded by a path character, so /lib/systemd/... is not one) must exist.
CHECKED_ROOTS = ("scripts", "Tests", "Sources", "docs", "packaging", "systemd", "udev", "Fuzz", "Benchmarks")
PATH_PATTERN = re.compile(r"(?<![\w./$~-])((?:%s)/[\w./*<>+-]*)" % "|".join(CHECKED_ROOTS))
# Paths the pages name that a run makes and git ignores.
MADE_BY_A_RUN = {"Benchmarks/.benchmarkBaselines/"}

FENCE = re.compile(r"^```.*?^```[^\n]*$", re.M | re.S)
COMMENT = re.compile(r"<!--.*?-->", re.S)
INLINE_CODE = re.compile(r"`([^`]+)`")
LINK = re.compile(r"\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")


def relative(path: Path) -> str:
    return str(path.relative_to(REPO))


@functools.cache
def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def prose(page: str) -> str:
    """The page without fenced blocks and HTML comments: where links are links."""
    return COMMENT.sub("", FENCE.sub("", page))


def code_spans(page: str) -> list[str]:
    """Inline code of the prose (table pipes unescaped) and each line of the fenced
    blocks, shell comments cut."""
    spans = [span.replace("\\|", "|") for span in INLINE_CODE.findall(prose(page))]
    for block in FENCE.findall(page):
        for line in block.splitlines()[1:-1]:
            spans.append(re.sub(r"\s#\s.*$", "", line))
    return spans


# ---- anchors: GitHub's heading ids -------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's id for a heading: lower case, punctuation dropped, spaces to hyphens."""
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", text(path)).splitlines():
        if match := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line):
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def test_slugs_follow_github():
    assert slug("Automation (CI)") == "automation-ci"
    assert slug("Yubico's device suite: the explained skips") == "yubicos-device-suite-the-explained-skips"
    assert slug("`latchkeyd` flags") == "latchkeyd-flags"


# ---- links ---------------------------------------------------------------------------


def links():
    for page in PAGES:
        for _, target in LINK.findall(prose(text(page))):
            if not re.match(r"[a-z][a-z0-9+.-]*:", target):
                yield page, target


def test_the_pages_exist():
    names = {relative(page) for page in PAGES}
    for page in ("README.md", "docs/configuration.md", "docs/control-api.md", "docs/automation.md",
                 "docs/conformance.md", "docs/testing.md", "docs/packaging.md", "docs/usbip.md",
                 "docs/ARCHITECTURE.md", "docs/CONTRIBUTING.md"):
        assert page in names, page


def test_every_relative_link_points_to_a_file_and_heading_that_exist():
    broken = []
    checked = 0
    for page, target in links():
        checked += 1
        file_part, _, anchor = target.partition("#")
        destination = (page.parent / file_part).resolve() if file_part else page
        if not destination.is_relative_to(REPO):
            broken.append(f"{relative(page)}: {target}: outside the repository")
        elif not destination.exists():
            broken.append(f"{relative(page)}: {target}: no {file_part}")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{relative(page)}: {target}: no heading #{anchor} in {relative(destination)}")
    assert checked > 20, "the link pattern found almost nothing"
    assert not broken, "\n".join(broken)


# ---- paths ---------------------------------------------------------------------------


def named_paths():
    for page in PAGES:
        for match in PATH_PATTERN.finditer(COMMENT.sub("", text(page))):
            yield page, match.group(1).rstrip(".,:;")


def test_every_path_the_pages_name_exists():
    missing = []
    checked = 0
    for page, name in named_paths():
        checked += 1
        if name in MADE_BY_A_RUN:
            continue
        pattern = re.sub(r"<[^>]*>", "*", name)
        if not list(REPO.glob(pattern.rstrip("/"))):
            missing.append(f"{relative(page)}: {name}")
    assert checked > 50, "the path pattern found almost nothing"
    assert not missing, "named in the docs but not in the tree:\n" + "\n".join(sorted(set(missing)))


def test_every_environment_variable_the_pages_name_is_read_somewhere():
    named = {(page, variable) for page in PAGES
             for variable in re.findall(r"\b((?:LATCHKEY|RIG)_[A-Z0-9_]+)\b", text(page))}
    sources = "\n".join(
        path.read_text(encoding="utf-8", errors="replace")
        for folder in ("scripts", "Tests", "Sources", "Benchmarks/Sources", "Benchmarks/Benchmarks", "Fuzz", ".ci")
        for path in (REPO / folder).rglob("*")
        if path.is_file() and path.suffix in {".sh", ".py", ".swift", ""} and "Crashers" not in path.parts
    ) + text(REPO / "Makefile")
    unknown = sorted(f"{relative(page)}: {variable}" for page, variable in named if variable not in sources)
    assert named
    assert not unknown, "named in the docs, read nowhere:\n" + "\n".join(unknown)


def test_every_fuzzer_the_pages_name_exists():
    fuzzers = {path.name for path in (REPO / "Fuzz" / "Sources").iterdir()}
    named = {(page, name) for page in PAGES for name in re.findall(r"\b(Fuzz[A-Z]\w+)\b", text(page))}
    unknown = sorted(f"{relative(page)}: {name}" for page, name in named if name not in fuzzers)
    assert named
    assert not unknown, "\n".join(unknown)


# ---- the built programs --------------------------------------------------------------


def binary(variable: str, name: str) -> Path:
    """$variable, else .build/debug/NAME; fails when the variable names a missing file,
    skips when there is no build."""
    path = Path(os.environ.get(variable, f".build/debug/{name}"))
    if not path.is_absolute():
        path = path if path.exists() else REPO / path
    if not path.exists():
        if os.environ.get(variable):
            pytest.fail(f"{variable}={path} does not exist: build it with swift build")
        pytest.skip(f"no {name} at {path} (set {variable})")
    return path


@functools.cache
def tool_info(variable: str, name: str) -> dict:
    """The program's own description of its commands and options (swift-argument-parser)."""
    run = subprocess.run([binary(variable, name), "--experimental-dump-help"], capture_output=True, text=True,
                         timeout=30, check=True)
    return json.loads(run.stdout)["command"]


def option_kinds(command: dict) -> dict[str, str]:
    """Each option's spelling (--key, -n) and whether it is an `option` (takes a value) or a `flag`."""
    kinds = {"--help": "flag", "-h": "flag"}
    for argument in command.get("arguments", []):
        if argument.get("kind") in ("option", "flag"):
            for name in argument.get("names", []):
                prefix = "--" if name["kind"] in ("long", "longWithSingleDash") else "-"
                kinds[prefix + name["name"]] = argument["kind"]
    return kinds


def options(command: dict) -> set[str]:
    return set(option_kinds(command))


def subcommands(command: dict) -> dict[str, dict]:
    return {sub["commandName"]: sub for sub in command.get("subcommands", [])
            if sub["commandName"] != "help" and sub.get("shouldDisplay", True)}


def subtree(command: dict):
    yield command
    for sub in subcommands(command).values():
        yield from subtree(sub)


def option_words(span: str) -> list[str]:
    """The options a usage line names: `[--key K]` gives --key, `--[no-]uv` both forms."""
    found = []
    for word in re.findall(r"(?<![\w-])(--?\[?[A-Za-z][\w\[\]-]*)", span):
        word = word.rstrip("]")
        if "[no-]" in word:
            found += [word.replace("[no-]", ""), word.replace("[no-]", "no-")]
        elif not word.startswith("-["):
            found.append(word.replace("[", ""))
    return found


def mentions(program: str, aliases: tuple[str, ...] = ()) -> list[tuple[Path, str]]:
    """What follows `program` (a word of its own, not part of a path or a file name)
    in each code span of the pages."""
    names = "|".join(re.escape(name) for name in (program, *aliases))
    pattern = re.compile(r"(?<![\w/.-])(?:%s)(?![\w/.-])(.*)" % names, re.S)
    found = []
    for page in PAGES:
        for span in code_spans(text(page)):
            for match in pattern.finditer(span):
                # up to the end of the shell command: a pipe (` | `; `a|b` is a choice), `;`, `&`
                found.append((page, re.split(r"\s\|\s|;|&", match.group(1))[0]))
    return found


def check_latchkeyctl_usage(root: dict, rest: str) -> list[str]:
    """Walks a usage line down latchkeyctl's commands: the first word at each command
    with subcommands must name one (alternatives `a|b` each); then every option must
    belong to the command reached, its ancestors or, where the line offers
    alternatives, the group they belong to."""
    problems = []
    words = rest.replace("[", " ").replace("]", " ").split()
    path = [root]
    node = root
    widened = "|" in rest
    index = 0
    while index < len(words) and subcommands(node):
        word = words[index]
        index += 1
        if word.startswith("-"):
            if option_kinds(node).get(word) == "option":
                index += 1  # its value
            continue
        parts = [part for part in word.split("|") if part]
        if not all(re.fullmatch(r"[a-z][a-z0-9-]*", part) for part in parts):
            break  # a placeholder (NAME, KEY) for a default subcommand's argument
        unknown = [part for part in parts if part not in subcommands(node)]
        if unknown:
            problems.append(f"no command `{' '.join(c['commandName'] for c in path)} {unknown[0]}`")
            return problems
        if len(parts) > 1:
            break
        node = subcommands(node)[parts[0]]
        path.append(node)
    scope = set().union(*(options(command) for command in path))
    group = path[-2] if widened and len(path) > 1 and not subcommands(node) else node
    for command in subtree(group):
        scope |= options(command)
    for word in option_words(rest):
        if word not in scope:
            problems.append(f"`{' '.join(c['commandName'] for c in path)}` has no option {word}")
    return problems


def test_every_latchkeyctl_command_and_option_the_pages_name_exists():
    root = tool_info("LATCHKEYCTL", "latchkeyctl")
    found = mentions("latchkeyctl")
    assert len(found) > 40, "the mention pattern found almost nothing"
    problems = [f"{relative(page)}: latchkeyctl{rest.strip()[:80] and ' ' + rest.strip()[:80]}: {problem}"
                for page, rest in found for problem in check_latchkeyctl_usage(root, rest)]
    assert not problems, "\n".join(problems)


def test_every_latchkeyctl_command_is_in_the_command_table():
    root = tool_info("LATCHKEYCTL", "latchkeyctl")
    # the first cell of each row of the table: `latchkeyctl keys list\|show NAME\|create NAME ...`
    cells = [re.split(r"(?<!\\)\|", line)[1].replace("\\|", "|").strip()
             for line in text(DOCS / "control-api.md").splitlines() if line.startswith("| `latchkeyctl ")]
    assert cells, "docs/control-api.md has no latchkeyctl table"
    missing = []

    def visit(command: dict, path: list[str]):
        for name, sub in subcommands(command).items():
            words = path + [name]
            if not any(cell.startswith(f"`latchkeyctl {words[0]}") and set(words) <= set(re.split(r"[^\w-]+", cell))
                       for cell in cells):
                missing.append(" ".join(words))
            visit(sub, words)

    visit(root, [])
    assert not missing, "latchkeyctl commands without a row in docs/control-api.md: " + ", ".join(missing)


def test_every_latchkeyd_flag_the_pages_name_exists_and_the_table_has_them_all():
    known = options(tool_info("LATCHKEYD", "latchkeyd")) | {"--version"}
    problems = [f"{relative(page)}: latchkeyd{rest[:60]}: no option {word}"
                for page, rest in mentions("latchkeyd", ("scripts/run.sh",))
                for word in option_words(rest.split("\n")[0]) if word not in known]
    assert not problems, "\n".join(problems)
    page = text(DOCS / "configuration.md")
    table = page.split("## latchkeyd flags", 1)[1].split("\n\n", 2)[1]
    listed = {word for line in table.splitlines() for word in option_words(line.split("|")[1])}
    assert listed <= known, f"the flags table names what latchkeyd lacks: {sorted(listed - known)}"
    undocumented = known - listed - {"--help", "-h", "--version"}
    assert not undocumented, f"latchkeyd flags missing from docs/configuration.md's table: {sorted(undocumented)}"


def test_every_latchkey_webdriver_option_the_pages_name_exists():
    known = options(tool_info("LATCHKEY_WEBDRIVER", "latchkey-webdriver")) | {"--version"}
    found = mentions("latchkey-webdriver")
    problems = [f"{relative(page)}: latchkey-webdriver{rest[:60]}: no option {word}"
                for page, rest in found for word in option_words(rest.split("\n")[0]) if word not in known]
    assert not problems, "\n".join(problems)


def test_the_default_configuration_is_what_latchkeyd_prints():
    page = text(DOCS / "configuration.md")
    marker = "<!-- checked: the output of latchkeyd --print-default-config -->\n```toml\n"
    assert page.count(marker) == 1, "docs/configuration.md: the marked default configuration block is missing"
    documented = page.split(marker, 1)[1].split("\n```", 1)[0]
    printed = subprocess.run([binary("LATCHKEYD", "latchkeyd"), "--print-default-config"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
    diff = "\n".join(difflib.unified_diff(documented.splitlines(), printed.rstrip("\n").splitlines(),
                                          "docs/configuration.md", "latchkeyd --print-default-config", lineterm=""))
    assert not diff, diff


# ---- the architecture and conformance pages ----------------------------------------


def package_targets() -> set[str]:
    """Package.swift's targets, less those that live under Tests/."""
    manifest = text(REPO / "Package.swift")
    starts = [m for m in re.finditer(r"\.(target|executableTarget|systemLibrary|testTarget)\(\s*name:\s*\"([^\"]+)\"",
                                     manifest)]
    targets = set()
    for match, following in zip(starts, starts[1:] + [None]):
        body = manifest[match.end():following.start() if following else len(manifest)]
        if match.group(1) != "testTarget" and 'path: "Tests/' not in body:
            targets.add(match.group(2))
    return targets


def section(page: str, heading: str) -> str:
    return page.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_package_table_names_every_target():
    table = section(text(DOCS / "ARCHITECTURE.md"), "What is in the package")
    listed = {name for line in table.splitlines() if line.startswith("| `")
              for name in re.findall(r"`([\w-]+)`", line.split("|")[1])}
    targets = package_targets()
    assert {"CTAP", "LatchkeyDaemon", "latchkeyctl", "CZlib"} <= targets, targets
    assert not targets - listed, f"docs/ARCHITECTURE.md's package table misses {sorted(targets - listed)}"
    assert not listed - targets, f"docs/ARCHITECTURE.md's package table names no target {sorted(listed - targets)}"


def target_folders() -> dict[str, Path]:
    """Each target of Package.swift that has Swift sources outside Tests/, and its folder."""
    manifest = text(REPO / "Package.swift")
    starts = [m for m in re.finditer(r"\.(target|executableTarget|systemLibrary|testTarget)\(\s*name:\s*\"([^\"]+)\"",
                                     manifest)]
    folders = {}
    for match, following in zip(starts, starts[1:] + [None]):
        body = manifest[match.end():following.start() if following else len(manifest)]
        if match.group(1) in ("testTarget", "systemLibrary"):
            continue
        path = re.search(r'path:\s*"([^"]+)"', body)
        folder = path.group(1) if path else f"Sources/{match.group(2)}"
        if not folder.startswith("Tests/"):
            folders[match.group(2)] = REPO / folder
    return folders


# An import declaration, with any attributes (@preconcurrency, @_spi(...), @testable), access
# level and kind (`import struct Foo.Bar`): the module is the first name after them.
IMPORT = re.compile(r"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?import\s+"
                    r"(?:(?:struct|class|enum|protocol|typealias|func|var|let)\s+)?(\w+)", re.M)


def imports_of(folder: Path) -> set[str]:
    """The modules the Swift files under `folder` import."""
    return {match.group(1) for path in folder.rglob("*.swift") for match in IMPORT.finditer(text(path))}


def documented_imports() -> dict[str, set[str]]:
    """docs/ARCHITECTURE.md's import table: target -> the modules its row names."""
    table = section(text(DOCS / "ARCHITECTURE.md"), "Targets and what they may import")
    rows = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and (name := re.fullmatch(r"`([\w-]+)`", cells[0])):
            rows[name.group(1)] = set(re.findall(r"`(\w+)`", cells[1]))
    return rows


def test_the_import_table_is_what_each_target_imports():
    documented = documented_imports()
    folders = target_folders()
    assert {"LatchkeyCore", "LatchkeyDaemon", "LatchkeyWebDriver", "latchkey-webdriver"} <= set(folders), folders
    assert set(documented) == set(folders), (
        f"docs/ARCHITECTURE.md's import table has rows for {sorted(set(documented) - set(folders))} that are no "
        f"target, and none for {sorted(set(folders) - set(documented))}")
    wrong = {target: {"imported, not in the table": sorted(imports_of(folder) - documented[target]),
                      "in the table, not imported": sorted(documented[target] - imports_of(folder))}
             for target, folder in folders.items() if imports_of(folder) != documented[target]}
    assert not wrong, f"docs/ARCHITECTURE.md's import table differs from the sources: {wrong}"


CORE = REPO / "Sources" / "LatchkeyCore"


def test_the_key_core_imports_no_nio_hummingbird_or_daemon():
    imports = imports_of(CORE)
    assert "CTAP" in imports, imports
    adapters = sorted(name for name in imports if name.startswith(("NIO", "Hummingbird", "HTTPTypes", "AsyncHTTPClient",
                                                                     "ServiceLifecycle", "LatchkeyDaemon")))
    assert not adapters, f"Sources/LatchkeyCore imports {adapters}: HTTP and sockets are the daemon's"


def http_statuses() -> set[str]:
    """The HTTP statuses the control API answers with: its OpenAPI description's responses
    and those its error mapping (Control/ErrorMapping.swift) gives."""
    described = re.findall(r"^\s+['\"]?([1-5]\d\d)['\"]?:\s*$", text(DOCS / "control-api.openapi.yaml"), re.M)
    mapped = re.findall(r"\((\d{3}), \"", text(REPO / "Sources/LatchkeyDaemon/Control/ErrorMapping.swift"))
    return set(described) | set(mapped)


def test_no_file_of_the_key_core_names_an_http_status():
    statuses = http_statuses()
    assert {"200", "400", "403", "404", "507"} <= statuses, statuses
    number = re.compile(r"(?<![\w.-])(%s)(?![\w.-])" % "|".join(sorted(statuses)))
    types = re.compile(r"\b(HTTPResponse|HTTPRequest|HTTPFields|HTTPTypes|Hummingbird\w*|NIO\w+)\b")
    found = [f"{relative(path)}:{number_}: {line.strip()}"
             for path in sorted(CORE.rglob("*.swift"))
             for number_, line in enumerate(text(path).splitlines(), 1)
             if number.search(line) or types.search(line)]
    assert not found, "the key core names HTTP (its callers map CoreError; Control/ErrorMapping.swift):\n" + "\n".join(found)


def test_the_layout_names_every_script_and_folder():
    layout = section(text(DOCS / "ARCHITECTURE.md"), "Layout")
    scripts = {path.name for path in (REPO / "scripts").iterdir() if path.is_file()}
    missing = sorted(name for name in scripts if not re.search(r"(?<![\w.-])%s(?![\w.-])" % re.escape(name), layout))
    assert not missing, f"docs/ARCHITECTURE.md's layout misses scripts {missing}"
    try:
        tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
        folders = {line.split("/", 1)[0] for line in tracked.splitlines() if "/" in line}
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    missing = sorted(folder for folder in folders if f"{folder}/" not in layout)
    assert not missing, f"docs/ARCHITECTURE.md's layout misses folders {missing}"


def test_the_explained_skips_are_the_device_suite_plugins():
    plugin = ast.parse(text(REPO / "Tests" / "device-suite" / "latchkey_plugin.py"))
    assignment = next(node for node in plugin.body if isinstance(node, ast.Assign)
                      and any(getattr(target, "id", None) == "EXPLAINED_SKIPS" for target in node.targets))
    expected = {(pattern, why) for pattern, why in ast.literal_eval(assignment.value)}
    table = section(text(DOCS / "conformance.md"), "Yubico's device suite: the explained skips")
    documented = set()
    for line in table.splitlines():
        if match := re.fullmatch(r"\| `([^`]+)` \| (.+) \|", line):
            documented.add((match.group(1), match.group(2)))
    assert documented == expected, f"documented {sorted(documented)}, the plugin has {sorted(expected)}"


def test_the_readme_stays_a_ten_minute_read():
    lines = text(REPO / "README.md").count("\n")
    assert lines <= 250, f"README.md has {lines} lines; move detail to a page in docs/ (at most 250)"
