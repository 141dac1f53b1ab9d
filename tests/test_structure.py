"""The package's shape, so that a reader sees the design from the tree: no import cycle
anywhere in ``src/legio``, honest module sizes, unique module names, a handful of modules
at the top, front-ends that talk to the door (``legio.app``) only — never SQLite, the SDK or
the engine's rooms, neither by import nor by an ``app.<part>.`` chain — and a module map
(``docs/architecture.md``, each package's docstring) that names every module; and a
daemon that starts without what only some requests need (pictures, diffs, voice, the
shell grammar) nor the Claude Agent SDK and its ``mcp`` (until the first CLI starts):
those are imported when first needed.

Every import counts, including those inside functions and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "legio"
MAX_LINES = 600  # a module past this holds two jobs: split it by job (migrations exempt)
WARN_LINES = 450  # a warning: look whether it holds two jobs (never a reason to squeeze)
TOP_MAX = 12  # modules at the top of src/legio: the rest live in the package of their layer
DATA_TABLE_SKIPS = 2  # `# fmt: skip` on data tables only (guard's fields, the masked names)
ARCHITECTURE = SRC.parent / "docs" / "architecture.md"
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
    if path.name == "migrations.py":
        return  # an append-only list of migrations is one thing, however long
    assert lines <= MAX_LINES, f"{path.relative_to(SRC)} has {lines} lines: split it by job"
    if lines > WARN_LINES:
        warnings.warn(
            f"module size: {path.relative_to(SRC)} has {lines} lines; does it hold two jobs?",
            stacklevel=1,
        )


def test_modules_have_unique_names_and_few_live_at_the_top() -> None:
    names = [p.name for p in PACKAGE.rglob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"module names used twice: {twice}"
    top = sorted(
        p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")
    )
    assert len(top) <= TOP_MAX, f"{len(top)} modules at the top of src/legio: {top}"


def test_fmt_skip_is_for_data_tables_only() -> None:
    skips = sum(p.read_text(encoding="utf-8").count("fmt: skip") for p in PACKAGE.rglob("*.py"))
    assert skips <= DATA_TABLE_SKIPS, f"{skips} `# fmt: skip`: format code, keep it for tables"


def test_front_ends_reach_nothing_through_the_door() -> None:
    """``app.engine.threads.x`` in a front-end is the engine reached past the door, even though
    nothing was imported: the door has a typed method for each thing a front-end asks."""
    for path in (PACKAGE / "frontends").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Attribute):
                continue
            inner = node.value
            owner = inner.value
            is_app = (isinstance(owner, ast.Name) and owner.id == "app") or (
                isinstance(owner, ast.Attribute) and owner.attr == "app"
            )
            assert not is_app, (
                f"{path.relative_to(SRC)}:{node.lineno} reaches app.{inner.attr}.{node.attr}: "
                "add a method to LegioApp"
            )


def test_the_module_map_names_every_module_and_nothing_else() -> None:
    rows = set(re.findall(r"^\| `([\w/]+\.py)` \|", ARCHITECTURE.read_text(), re.MULTILINE))
    tree = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    assert tree - rows == set(), f"docs/architecture.md does not name {sorted(tree - rows)}"
    assert rows - tree == set(), f"docs/architecture.md names modules that are gone: {rows - tree}"


@pytest.mark.parametrize(
    "package",
    sorted(p.parent for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE),
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_each_package_docstring_names_its_modules(package: Path) -> None:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert doc, f"{package.relative_to(SRC)} has no docstring"
    for module in package.glob("*.py"):
        if module.name != "__init__.py":
            assert f"``{module.stem}``" in doc, (
                f"{package.relative_to(SRC)}'s docstring does not name {module.stem}"
            )


def test_front_ends_talk_to_the_app_only() -> None:
    everything = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    for name, path in everything.items():
        if not name.startswith("legio.frontends"):
            continue
        reached = imported(path, set(everything))
        engine = sorted(m for m in reached if m.startswith(ENGINE))
        assert not engine, f"{name} imports {engine}: ask legio.app instead"


# What only some requests need: drawn diffs (Pillow, Pygments' lexers), voice notes (PyAV,
# faster-whisper and its runtimes), the shell grammar (tree-sitter, for Bash approvals);
# and the Claude Agent SDK with the mcp package it loads (~33 MiB), until a CLI starts.
HEAVY = (
    "claude_agent_sdk",
    "mcp",
    "PIL",
    "pygments.style",
    "pygments.formatters.html",
    "av",
    "faster_whisper",
    "ctranslate2",
    "onnxruntime",
    "tree_sitter",
    "tree_sitter_bash",
    "legio.review.rendering",
    "legio.review.page",
    "aiohttp.web",
    "jinja2",
    "markdown_it",
)
STARTED = """
import asyncio, json, sys
from pathlib import Path
import legio.cli
from legio.app import LegioApp
from legio.config import load_config
from legio.frontends.telegram.bot import LegioBot
from legio.frontends.telegram.serving import build_application

async def main() -> None:
    config = load_config(Path(sys.argv[1]))
    app = await LegioApp.open(config)
    async def opened() -> LegioApp:
        return app
    build_application(config, "1:TOKEN", LegioBot(config, opened))
    await app.close()

asyncio.run(main())
print(json.dumps(sorted(sys.modules)))
"""


def test_the_daemon_starts_without_what_only_some_requests_need(
    castra_dir: Path, tmp_path: Path
) -> None:
    """``legio run``'s imports, the engine opened and the Telegram application built, in a
    fresh interpreter: none of the heavy modules is loaded yet."""
    config = tmp_path / "legio.toml"
    config.write_text('[claude]\ncli_path = "/bin/true"\n[telegram]\ncaesar_ids = [1]\n')
    done = subprocess.run(
        [sys.executable, "-c", STARTED, str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    assert [m for m in HEAVY if m in loaded] == []
