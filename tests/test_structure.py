"""The package's shape: no import cycle anywhere in ``src/legio``, small modules, and
front-ends that talk to ``legio.app`` only (never SQLite, the SDK or the engine's rooms).

Every import counts, including those inside functions and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "legio"
MAX_LINES = 600  # a module past this holds two jobs: split it by job (migrations exempt)
ENGINE = ("legio.store", "legio.sessions", "legio.legatus", "claude_agent_sdk", "aiosqlite")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(path: Path, known: set[str]) -> set[str]:
    """Every name ``path`` imports, resolved to the innermost known module (or kept)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            candidate = name
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            found.add(candidate or name)
    found.discard(me)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    names = set(known)
    return {name: imported(path, names) & names for name, path in known.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the list of modules around it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def test_the_checker_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def package_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The same edges with each subpackage (``legio.frontends``…) one node; a module at
    the top (``legio.app``) stays its own."""

    def node(module: str) -> str:
        parts = module.split(".")
        return ".".join(parts[:2]) if len(parts) > 2 else module

    folded: dict[str, set[str]] = {}
    for source, targets in edges.items():
        mine = node(source)
        folded.setdefault(mine, set()).update(node(t) for t in targets if node(t) != mine)
    return folded


def test_the_package_checker_finds_a_loop_between_a_module_and_a_package() -> None:
    edges = {
        "legio.admin": {"legio.frontends.views"},
        "legio.frontends.views": set(),
        "legio.frontends.telegram.bot": {"legio.admin"},
    }
    assert find_cycle(edges) is None  # module by module, no cycle…
    assert find_cycle(package_graph(edges)) is not None  # …but the packages import each other


def test_no_package_imports_a_module_that_imports_it_back() -> None:
    cycle = find_cycle(package_graph(graph()))
    assert cycle is None, "packages import each other: " + " → ".join(cycle or [])


def test_no_import_cycle_in_the_package() -> None:
    edges = graph()
    assert len(edges) > 20, "the package was not found"
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: p.name)
def test_no_module_is_over_the_size_limit(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(SRC)} has {lines} lines: split it by job"


def test_front_ends_talk_to_the_app_only() -> None:
    everything = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    for name, path in everything.items():
        if not name.startswith("legio.frontends"):
            continue
        reached = imported(path, set(everything))
        engine = sorted(m for m in reached if m.startswith(ENGINE))
        assert not engine, f"{name} imports {engine}: ask legio.app instead"
