"""The import graph has layers: handlers -> app/api -> sources, channels, storage, silences
-> domain and net (the network layer) -> nothing above them. No two folders import each other."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PACKAGE = ROOT / "layers" / "trunkwatch" / "trunkwatch"

# folder -> the folders it may import from (besides itself)
ALLOWED = {
    "domain": set(),
    "net": set(),
    "sources": {"domain", "net"},
    "channels": {"domain", "net"},
    "storage": {"domain"},
    "silences": {"domain", "storage"},
    "app": {"domain", "net", "sources", "channels", "storage", "silences"},
    "api": {"app", "domain", "silences", "storage"},
}


def _imports(path: Path) -> set[str]:
    """The trunkwatch folders a module imports (lazily imported ones too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "trunkwatch" and len(parts) > 1 and parts[1] in ALLOWED:
                found.add(parts[1])
    return found


def _top_level_imports(path: Path) -> set[str]:
    """The top-level packages a module imports (lazily imported ones too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found


def _modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_folder_imports_only_the_layers_below(folder: str) -> None:
    assert _modules(folder), f"no modules in {folder}/"
    wrong = {
        str(path.relative_to(PACKAGE)): sorted(_imports(path) - ALLOWED[folder] - {folder})
        for path in _modules(folder)
    }
    assert {module: bad for module, bad in wrong.items() if bad} == {}


def test_every_folder_of_the_package_has_a_place_in_the_layers() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(ALLOWED)


def test_no_two_folders_import_each_other() -> None:
    graph = {folder: set().union(*(_imports(p) for p in _modules(folder))) - {folder} for folder in ALLOWED}
    cycles = sorted((a, b) for a in graph for b in graph[a] if a < b and a in graph.get(b, set()))
    assert cycles == []


def test_handlers_call_into_app_or_api_only() -> None:
    for path in sorted((ROOT / "functions").glob("*/app.py")):
        assert _imports(path) <= {"app", "api", "domain"}, path


def test_no_module_of_the_package_reads_the_environment_but_the_settings() -> None:
    readers = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "os.environ" in path.read_text(encoding="utf-8")
    )
    # The settings read the function's environment; a source token may name a variable.
    assert readers == ["app/settings.py", "sources/credentials.py"]


def test_tracing_sits_beside_the_folders_for_the_handlers_alone() -> None:
    # trunkwatch/tracing.py wraps a handler; nothing in the package imports it.
    assert {p.stem for p in PACKAGE.glob("*.py")} == {"__init__", "tracing"}
    importers = [p for p in PACKAGE.rglob("*.py") if "trunkwatch.tracing" in p.read_text(encoding="utf-8")]
    assert importers == []
    for path in sorted((ROOT / "functions").glob("*/app.py")):
        assert "from trunkwatch.tracing import traced" in path.read_text(encoding="utf-8"), path


def test_only_the_handlers_resolve_their_environment() -> None:
    """The edge: each handler builds its Edge once; the package takes what it needs as
    arguments (the API's routes get the handler's edge with the request)."""
    builders = sorted(
        str(path.relative_to(ROOT))
        for path in [*PACKAGE.rglob("*.py"), *(ROOT / "functions").rglob("*.py")]
        if "Edge.from_environ(" in path.read_text(encoding="utf-8")
        and path != PACKAGE / "app" / "settings.py"
    )
    assert builders == sorted(str(p.relative_to(ROOT)) for p in (ROOT / "functions").glob("*/app.py"))


def test_nothing_above_storage_imports_pynamodb() -> None:
    """PynamoDB stays behind the storage port: its models, exceptions and transactions."""
    above = [
        *(path for folder in ALLOWED if folder != "storage" for path in _modules(folder)),
        *(ROOT / "functions").glob("*/app.py"),
    ]
    assert [path for path in above if "pynamodb" in _top_level_imports(path)] == []
