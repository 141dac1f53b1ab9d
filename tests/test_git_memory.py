"""Legio's own git runs under a memory limit: a huge one-line file cannot make ``/diff``'s
``git merge-tree`` take the machine; git fails with a clear sentence, the daemon goes on."""

from __future__ import annotations

import resource
from collections.abc import Callable
from pathlib import Path

import pytest

from legio.castra import Castra
from legio.config import load_config
from legio.errors import ProjectError
from legio.projects import gitsafe
from legio.projects.branchwork import branch_work
from legio.projects.copies import Projects
from tests.gitrepo import git

SIZE = 24_000_000  # one line; git merge-tree needs about five times this (~120 MB)


def one_line_conflict(repo: Path) -> None:
    """``main`` and ``legio/vorenus/main`` each change the same huge one-line file."""
    repo.mkdir()
    git(repo, "init", "--quiet", "-b", "main")
    (repo / "big").write_bytes(b"a" * SIZE + b"\n")
    git(repo, "add", "big")
    git(repo, "commit", "--quiet", "-m", "base")
    git(repo, "checkout", "--quiet", "-b", "legio/vorenus/main")
    (repo / "big").write_bytes(b"b" + b"a" * SIZE + b"\n")
    git(repo, "commit", "--quiet", "-am", "agent")
    git(repo, "checkout", "--quiet", "main")
    (repo / "big").write_bytes(b"a" * SIZE + b"c\n")
    git(repo, "commit", "--quiet", "-am", "caesar")


async def test_a_huge_one_line_merge_fails_cleanly_under_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "app"
    one_line_conflict(repo)
    before = resource.getrlimit(resource.RLIMIT_AS)
    monkeypatch.setattr(gitsafe, "MEMORY_LIMIT_MB", 64.0)
    with pytest.raises(ProjectError) as caught:
        await branch_work(repo, "legio/vorenus/main", "main")
    said = str(caught.value)
    assert "ran out of the memory Legio gives it (64 MiB" in said
    assert "git_memory_mb" in said
    assert "Traceback" not in said
    # the daemon is unaffected: its own limit unchanged, small git commands still work
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    out = await gitsafe.run(repo, "rev-parse", "main", hostile=False, work_tree=False)
    assert len(out.strip()) == 40

    monkeypatch.setattr(gitsafe, "MEMORY_LIMIT_MB", 1024.0)  # enough: the merge is read
    work = await branch_work(repo, "legio/vorenus/main", "main", text=False)
    assert work is not None and work.ahead == 1


def test_the_limit_is_configured_in_projects(
    castra_dir: Path, write_config: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gitsafe, "MEMORY_LIMIT_MB", gitsafe.MEMORY_LIMIT_MB)
    assert gitsafe.DEFAULT_MEMORY_LIMIT_MB == 2048
    config = load_config(write_config("[projects]\ngit_memory_mb = 512\n"))
    Projects(config, Castra(castra_dir))
    assert gitsafe.MEMORY_LIMIT_MB == 512
