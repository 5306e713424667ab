"""The parts' import rules (DESIGN.md, "Parts and their seams"), read from the source with ``ast``.

Every import counts, also one inside a function (a lazy import still ties the parts together),
except under ``if TYPE_CHECKING:`` for the cycle rules. A module that loads modules by name
(``importlib.import_module``) imports each platform module named in its string constants.

What does not hold yet is listed in ``KNOWN``, one entry per importing file and imported module.
The list only shrinks: a new violation fails, and so does an entry that no longer occurs (take
it out when you fix it).
"""

from __future__ import annotations

import ast
import builtins
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PARTS = {  # import name -> folder
    "agentwatch": ROOT / "sdk" / "agentwatch",
    "agentwatch_api": ROOT / "sdk" / "agentwatch_api",  # the collector's HTTP contract (the SDK's ``api`` extra)
    "collector": ROOT / "collector",
    "dashboard": ROOT / "dashboard",
    "alerts": ROOT / "alerts",
    "reference_agent": ROOT / "reference_agent",
    "bench": ROOT / "bench",
}
# The platform's parts install under one namespace (pyproject.toml's package-dir).
IMPORT_PREFIX = {name: ("agentwatch_platform",) for name in ("collector", "dashboard", "alerts", "reference_agent")}
PLATFORM = {"agentwatch_api", "collector", "dashboard", "alerts", "reference_agent", "bench"}
PRODUCT = {"agentwatch", "agentwatch_api", "collector", "dashboard", "alerts", "reference_agent"}
# Installed by the ``dev`` extra only (pyproject.toml): the product never imports them.
TEST_ONLY = (
    "pytest",
    "hypothesis",
    "selenium",
    "schemathesis",
    "aiosmtpd",
    "opentelemetry.exporter.otlp.proto.grpc",
    "opentelemetry.instrumentation",
    "openinference",
    "traceloop",
    "openlit",
)

# Known violations: "importing file -> imported module". Shrink only.
KNOWN: dict[str, set[str]] = {
    "no_private_sdk_imports": set(),
    # an import that closes a cycle: leaving it out of the graph leaves none
    "no_cycles_between_parts": set(),
    "no_cycles_between_modules": set(),
}


@dataclass(frozen=True)
class Import:
    file: str  # relative to the repository root
    source: str  # the importing module
    target: str  # the imported module, as written (absolute)
    type_checking: bool = False

    @property
    def key(self) -> str:
        return f"{self.file} -> {self.target}"


@dataclass
class _Visitor:
    module: str
    is_package: bool
    file: str
    found: list[Import] = field(default_factory=list)

    def visit(self, node: ast.AST, *, type_checking: bool = False) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for inner in child.body:
                    self.visit_one(inner, type_checking=True)
                for inner in child.orelse:
                    self.visit_one(inner, type_checking=type_checking)
            else:
                self.visit_one(child, type_checking=type_checking)

    def visit_one(self, node: ast.AST, *, type_checking: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.add(alias.name, type_checking)
        elif isinstance(node, ast.ImportFrom):
            base = self.absolute(node)
            submodules = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules()]
            for name in submodules:
                self.add(name, type_checking)
            if len(submodules) < len(node.names):
                self.add(base, type_checking)
        self.visit(node, type_checking=type_checking)

    def absolute(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        package = self.module.split(".") if self.is_package else self.module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        return ".".join(package + ([node.module] if node.module else []))

    def add(self, target: str, type_checking: bool) -> None:
        self.found.append(Import(self.file, self.module, target, type_checking))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


@cache
def modules() -> dict[str, Path]:
    """Every module of every part, by its import name."""
    found: dict[str, Path] = {}
    for name, folder in PARTS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [*IMPORT_PREFIX.get(name, ()), name, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


@cache
def imports() -> tuple[Import, ...]:
    found: list[Import] = []
    for module, path in modules().items():
        tree = ast.parse(path.read_text(), filename=str(path))
        visitor = _Visitor(module, path.name == "__init__.py", str(path.relative_to(ROOT)))
        visitor.visit(tree)
        found += visitor.found + _loaded_by_name(tree, visitor)
    return tuple(found)


def _loaded_by_name(tree: ast.Module, visitor: _Visitor) -> list[Import]:
    """Platform modules named in strings of a module that calls ``import_module``."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _called_name(n.func) == "import_module"]
    if not calls:
        return []
    names = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return [Import(visitor.file, visitor.module, name) for name in sorted(names & modules().keys())]


def _called_name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def part(module: str) -> str:
    """The part a module belongs to: its import name's first segment, or the platform part after ``agentwatch_platform``."""
    head, _, rest = module.partition(".")
    return rest.split(".")[0] if head == "agentwatch_platform" and rest else head


def known_module(target: str) -> str | None:
    """The platform module ``target`` loads (itself, or the package holding a name it imports)."""
    while target and target not in modules():
        target = target.rpartition(".")[0]
    return target or None


def _check(rule: str, violations: Iterator[Import]) -> None:
    found = {v.key for v in violations}
    new, fixed = sorted(found - KNOWN.get(rule, set())), sorted(KNOWN.get(rule, set()) - found)
    assert not new, f"{rule}: new violations (see DESIGN.md, 'Parts and their seams'):\n  " + "\n  ".join(new)
    assert not fixed, f"{rule}: fixed, take these out of KNOWN in tests/test_architecture.py:\n  " + "\n  ".join(fixed)


def test_sdk_imports_nothing_of_the_platform() -> None:
    _check(
        "sdk_imports_no_platform",
        (i for i in imports() if part(i.source) == "agentwatch" and part(i.target) in PLATFORM | {"tests"}),
    )


def test_only_the_sdk_imports_its_private_modules() -> None:
    """Outside the SDK, ``agentwatch`` and its public modules (``agentwatch.semconv``), never ``agentwatch._*``."""
    _check(
        "no_private_sdk_imports",
        (
            i
            for i in imports()
            if part(i.source) != "agentwatch"
            and part(i.target) == "agentwatch"
            and any(p.startswith("_") for p in i.target.split(".")[1:])
        ),
    )


def test_dashboard_and_reference_stack_import_no_collector_module() -> None:
    _check(
        "dashboard_and_reference_stack_import_no_collector",
        (i for i in imports() if part(i.source) in {"dashboard", "reference_agent"} and part(i.target) == "collector"),
    )


def test_the_contract_imports_no_part() -> None:
    """``agentwatch_api`` is what both sides of the wire import, so it imports neither."""
    _check(
        "contract_imports_no_part",
        (
            i
            for i in imports()
            if part(i.source) == "agentwatch_api"
            and part(i.target) in PARTS
            and part(i.target) not in {"agentwatch_api", "agentwatch"}
        ),
    )


def test_collector_never_names_the_dashboard() -> None:
    _check(
        "collector_names_no_dashboard",
        (i for i in imports() if part(i.source) == "collector" and part(i.target) == "dashboard"),
    )


def test_collector_never_names_the_alerts() -> None:
    """The alerts run inside the collector as a plugin handed to ``create_app`` (``collector.plugins``)."""
    _check(
        "collector_names_no_alerts",
        (i for i in imports() if part(i.source) == "collector" and part(i.target) == "alerts"),
    )
    # nor writes down what the alerts bring themselves (collector.plugins.Plugin: routers, scopes)
    naming = [str(p.relative_to(ROOT)) for p in (ROOT / "collector").rglob("*.py") if "/api/alerts" in p.read_text()]
    assert not naming, f"the alerts plugin declares its routes' scopes (alerts/api.py), not: {naming}"


def test_the_command_line_imports_no_platform_module() -> None:
    """``agentwatch.cli`` finds the parts' commands through entry points, so it names no part: it
    imports the standard library only (the SDK's light install runs it), and no part imports it."""
    cli = {"agentwatch.cli", "agentwatch.__main__"}
    _check(
        "cli_imports_only_the_standard_library",
        (
            i
            for i in imports()
            if i.source in cli and i.target not in cli and part(i.target) not in sys.stdlib_module_names
        ),
    )
    _check("no_part_imports_the_cli", (i for i in imports() if i.target == "agentwatch.cli" and i.source not in cli))


def test_benchmarks_import_no_tests() -> None:
    """A benchmark runs after a plain ``pip install .``: no pytest, no test helpers."""
    _check("bench_imports_no_tests", (i for i in imports() if part(i.source) == "bench" and part(i.target) == "tests"))


def test_the_product_imports_no_benchmark() -> None:
    """``bench`` is not installed: a product module that imports it fails after ``pip install .``."""
    _check(
        "product_imports_no_bench",
        (i for i in imports() if part(i.source) in PRODUCT and part(i.target) == "bench"),
    )


def test_only_the_benchmarks_own_tests_import_a_benchmark() -> None:
    """``bench`` is not installed: what a test of the product needs (a workload, a way to start the
    collector) lives in an installed module or in ``tests/``. ``tests/bench`` tests the benchmarks."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.is_relative_to(ROOT / "tests" / "bench"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.relative_to(ROOT)} -> {n}" for n in names if n.split(".")[0] == "bench"]
    assert not found, "a test of the product imports a benchmark:\n  " + "\n  ".join(found)


_COLLECTOR = "agentwatch_platform.collector"


def test_ingest_reads_only_the_ingest_sql() -> None:
    """The ingest path runs the statements of ``storage.sql.ingest`` and no query's SQL or code, so a
    change to a query never reaches the write path."""
    _check(
        "ingest_reads_only_the_ingest_sql",
        (
            i
            for i in imports()
            if i.source.startswith(f"{_COLLECTOR}.ingest")
            and (
                (i.target.startswith(f"{_COLLECTOR}.storage.sql") and i.target != f"{_COLLECTOR}.storage.sql.ingest")
                or i.target.startswith(f"{_COLLECTOR}.query")
            )
        ),
    )


def test_the_store_imports_no_other_part_of_the_collector() -> None:
    """Storage is the bottom of the collector: it owns its SQL, its merges (held through a burst,
    ``storage.merge_hold``) and its text files; ingest and the queries ask it, never the other way."""
    allowed = tuple(f"{_COLLECTOR}.{name}" for name in ("storage", "settings", "errors"))
    _check(
        "storage_imports_no_other_collector_part",
        (
            i
            for i in imports()
            if i.source.startswith(f"{_COLLECTOR}.storage")
            and i.target.startswith(f"{_COLLECTOR}.")
            and not any(i.target == a or i.target.startswith(a + ".") for a in allowed)
        ),
    )


# The writer batches and writes; what else happens around an insert is a hook it is given.
MAX_WRITER_LINES = 200


def test_the_writer_batches_and_writes_only() -> None:
    """``ingest/writer.py`` stays small: a new "after an insert, also do X" is an ``InsertHook`` in a
    module of its own (``collector.ingest.hooks``), not another job of the writer."""
    lines = len((ROOT / "collector" / "ingest" / "writer.py").read_text().splitlines())
    assert lines < MAX_WRITER_LINES, f"collector/ingest/writer.py has {lines} lines; make the new job a hook"
    writer = f"{_COLLECTOR}.ingest.writer"
    jobs = {f"{_COLLECTOR}.ingest.{name}" for name in ("engine_join", "live_runs", "heap", "freshness")}
    assert not {i.target for i in imports() if i.source == writer} & jobs


def test_the_decoder_spec_is_the_only_thing_passed_to_c() -> None:
    """The native decoder is built from one ``DecoderSpec`` (``collector.ingest.spec``), handed whole:
    ``native.py`` calls ``Decoder`` with that one argument, and ``_native.c`` parses one object."""
    native = ROOT / "collector" / "ingest" / "otlp" / "native.py"
    calls = [
        node
        for node in ast.walk(ast.parse(native.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Decoder"
    ]
    assert len(calls) == 1, "one place builds the native decoder"
    (call,) = calls
    assert len(call.args) == 1 and not call.keywords, "Decoder takes the decoder spec, and nothing else"
    arg = call.args[0]
    assert isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id == "decoder_spec"
    source = (native.parent / "_native.c").read_text()
    init = source[source.index("static int Decoder_init(") :]
    assert 'PyArg_ParseTuple(args, "O", &spec)' in init[: init.index("\n}\n")]
    importers = {i.file for i in imports() if i.target == f"{_COLLECTOR}.ingest.otlp._native"}
    assert importers <= {"collector/ingest/otlp/native.py"}, "only native.py talks to the C decoder"


# The query layer is split by resource; a module past this many lines holds more than one.
MAX_QUERY_MODULE_LINES = 400


def test_query_and_sql_modules_stay_small() -> None:
    """Every module of ``collector/query`` and ``collector/storage/sql`` holds one resource."""
    long = sorted(
        str(path.relative_to(ROOT))
        for folder in (ROOT / "collector" / "query", ROOT / "collector" / "storage" / "sql")
        for path in folder.glob("*.py")
        if len(path.read_text().splitlines()) > MAX_QUERY_MODULE_LINES
    )
    assert not long, f"split these by resource (over {MAX_QUERY_MODULE_LINES} lines): {long}"


def test_the_product_imports_no_test_only_package() -> None:
    """Test-only packages live in the ``dev`` extra: a plain install has none of them."""
    _check(
        "product_imports_no_test_only_package",
        (
            i
            for i in imports()
            if part(i.source) in PRODUCT
            and any(i.target == name or i.target.startswith(name + ".") for name in TEST_ONLY)
        ),
    )


def test_the_sdk_tests_need_only_the_sdk() -> None:
    """``tests/sdk``, ``tests/support`` and the root ``conftest.py`` import nothing of the platform,
    so the SDK's tests run where only the SDK is installed (no chDB, no FastAPI)."""
    tests = ROOT / "tests"
    files = [tests / "conftest.py", *sorted((tests / "support").rglob("*.py")), *sorted((tests / "sdk").rglob("*.py"))]
    found: list[Import] = []
    for path in files:
        parts = ["tests", *path.relative_to(tests).with_suffix("").parts]
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        visitor = _Visitor(module, path.name == "__init__.py", str(path.relative_to(ROOT)))
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        found += visitor.found
    _check("sdk_tests_import_no_platform", (i for i in found if part(i.target) in PLATFORM))


def test_no_import_cycles_between_parts() -> None:
    edges = [
        i
        for i in imports()
        if not i.type_checking
        and part(i.source) != "bench"
        and part(i.target) in PARTS
        and part(i.target) != part(i.source)
    ]
    graph = _graph((part(i.source), part(i.target)) for i in edges if i.key not in KNOWN["no_cycles_between_parts"])
    _check("no_cycles_between_parts", (i for i in edges if _closes_cycle(graph, part(i.source), part(i.target))))


def test_no_import_cycles_between_modules() -> None:
    edges = [(i, known_module(i.target)) for i in imports() if not i.type_checking]
    edges = [(i, t) for i, t in edges if t is not None and t != i.source]
    graph = _graph((i.source, t) for i, t in edges if i.key not in KNOWN["no_cycles_between_modules"])
    _check("no_cycles_between_modules", (i for i, t in edges if _closes_cycle(graph, i.source, t)))


def _graph(edges: Iterator[tuple[str, str]]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
    return graph


def _closes_cycle(graph: dict[str, set[str]], source: str, target: str) -> bool:
    """Whether ``target`` reaches ``source`` in ``graph`` (so the edge source -> target closes a cycle)."""
    seen, todo = {target}, [target]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt == source:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def test_the_collector_keeps_one_folder_per_concern() -> None:
    """Only the composition root and what every concern shares sit at the collector's top level; a
    new module goes into its concern's folder (docs/development.md, "The layout")."""
    top = {path.stem for path in (ROOT / "collector").glob("*.py")}
    assert top == {
        "__init__",
        "app",
        "commands",
        "errors",
        "metrics",
        "plugins",
        "roles",
        "settings",
        "state",
        "tuning",
    }
    folders = {path.name for path in (ROOT / "collector").iterdir() if (path / "__init__.py").is_file()}
    assert folders == {"api", "auth", "engines", "ingest", "query", "storage"}


def _app_state_reads(tree: ast.AST) -> list[int]:
    """Lines that read ``app.state`` or ``<x>.app.state`` (an attribute of it, ``getattr`` on it,
    or the bag itself); assigning the whole of it (``app.state = CollectorState(...)``) is not a read."""
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "state"
        and isinstance(node.ctx, ast.Load)
        and (
            (isinstance(node.value, ast.Name) and node.value.id == "app")
            or (isinstance(node.value, ast.Attribute) and node.value.attr == "app")
        )
    )


def test_the_collector_state_is_read_through_collector_state_only() -> None:
    """The collector's ``app.state`` is typed (``collector.state.CollectorState``, one declared list
    of what it holds): the collector and its plugin, the alerts, read it through
    ``collector_state(app)``, so mypy checks every use and nothing new lands there unlisted."""
    folders = (ROOT / "collector", ROOT / "alerts")
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in folders
        for path in sorted(folder.rglob("*.py"))
        if path != ROOT / "collector" / "state.py"
        for line in _app_state_reads(ast.parse(path.read_text(), filename=str(path)))
    ]
    assert not found, f"read these through collector.state.collector_state(app): {found}"
    sample = "x = request.app.state.store\ny = getattr(app.state, 'roles', None)\napp.state = State()\n"
    assert _app_state_reads(ast.parse(sample)) == [1, 2]  # the reader itself


def _exception_classes(folder: Path) -> dict[str, list[str]]:
    """{class name: its bases' names} of every class in ``folder`` that is an exception: one whose
    base is a built-in exception, a name ending in Error or Exception, or another such class."""
    bases: dict[str, list[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = [
                    b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases
                ]
    builtin = {
        name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
    }
    found: set[str] = set()
    while True:
        more = {
            name
            for name, names in bases.items()
            if any(b in builtin or b in found or b.endswith(("Error", "Exception")) for b in names)
        }
        if more <= found:
            return {name: bases[name] for name in found}
        found |= more


@pytest.mark.parametrize(("folder", "root"), [("collector", "CollectorError"), ("alerts", "AlertsError")])
def test_every_exception_of_a_part_derives_from_its_root(folder: str, root: str) -> None:
    """One exception tree per part: every exception class in ``collector/`` derives from
    ``collector.errors.CollectorError``, whose docstring draws the tree; the alerts' from
    ``alerts.errors.AlertsError``, beside which they are defined."""
    classes = _exception_classes(ROOT / folder)
    rooted = {root}
    while more := {name for name, names in classes.items() if name not in rooted and rooted & set(names)}:
        rooted |= more
    loose = sorted(set(classes) - rooted)
    assert not loose, f"derive these from {folder}.errors.{root}: {loose}"
    drawn = (ROOT / folder / "errors.py").read_text()
    undrawn = sorted(name for name in rooted if name not in drawn)
    assert not undrawn, f"draw these in {folder}/errors.py's tree: {undrawn}"


def test_the_rules_see_known_imports() -> None:
    """The reader itself: a relative, a lazy and a by-name import are all found."""
    keys = {i.key for i in imports()}
    assert "sdk/agentwatch/__init__.py -> agentwatch._tracing" in keys  # from ._tracing import ...
    assert "sdk/agentwatch/__main__.py -> agentwatch.cli" in keys  # from agentwatch.cli import main
    assert "collector/commands.py -> agentwatch_api.client" in keys  # the contract, in its folder under sdk/
    assert "collector/commands.py -> agentwatch_platform.collector.app" in keys  # inside a function
    by_name = ast.parse(
        "import importlib\nfor name in ('agentwatch_platform.alerts.cli', 'no.such'):\n    importlib.import_module(name)\n"
    )
    assert [i.target for i in _loaded_by_name(by_name, _Visitor("x", False, "x.py"))] == [
        "agentwatch_platform.alerts.cli"
    ]


def test_a_new_violation_or_a_stale_entry_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker itself: what is not listed fails, and so does a listed entry that is gone."""
    found = Import("dashboard/x.py", "dashboard.x", "agentwatch_platform.collector.app")
    monkeypatch.setitem(KNOWN, "example", set())
    with pytest.raises(AssertionError, match="new violations"):
        _check("example", iter([found]))
    monkeypatch.setitem(KNOWN, "example", {found.key})
    _check("example", iter([found]))
    with pytest.raises(AssertionError, match="take these out of KNOWN"):
        _check("example", iter([]))
    assert _closes_cycle({"b": {"c"}, "c": {"a"}}, "a", "b") and not _closes_cycle({"b": {"c"}}, "a", "b")


def test_every_package_folder_is_installed() -> None:
    """pyproject.toml lists the packages (a mapped name cannot be discovered): none may be missing,
    also a folder of data files only (package-data)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {
        "agentwatch_platform." + ".".join(path.parent.relative_to(ROOT).parts)
        for name in IMPORT_PREFIX
        for path in (ROOT / name).rglob("*")
        if path.suffix in (".py", ".yaml", ".json", ".jsonl", ".txt", ".md", ".gz") and "__pycache__" not in path.parts
    }
    assert folders == listed, (
        f"add to pyproject.toml's packages: {sorted(folders - listed)}; remove: {sorted(listed - folders)}"
    )


def test_the_parts_are_imported_by_their_installed_names() -> None:
    """``from collector.x import ...`` would work from the repository root only (tests), never installed."""
    _check(
        "installed_names",
        (i for i in imports() if part(i.target) in IMPORT_PREFIX and not i.target.startswith("agentwatch_platform.")),
    )


def test_no_test_module_imports_a_conftest() -> None:
    """``conftest.py`` holds fixtures and hooks; what tests import lives in a module of its own
    (``tests/support/``, or a module beside them), so pytest's loading of conftests stays the only one."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.relative_to(ROOT)} -> {n}" for n in names if n.split(".")[-1] == "conftest"]
    assert not found, "import from a conftest.py (move it to a module):\n  " + "\n  ".join(found)
