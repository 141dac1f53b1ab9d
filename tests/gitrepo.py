"""Real git repositories for the projects tests: a project with a base branch and a remote."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

IDENTITY = {
    "GIT_AUTHOR_NAME": "Caesar",
    "GIT_AUTHOR_EMAIL": "caesar@example.invalid",
    "GIT_COMMITTER_NAME": "Caesar",
    "GIT_COMMITTER_EMAIL": "caesar@example.invalid",
}


def git(repo: Path, *args: str, caesar: bool = True) -> str:
    """Run git as Caesar would in ``repo`` (his own tools, his identity), or, with
    ``caesar=False``, as an agent in its copy (the identity its copy's config gives)."""
    env = {**os.environ, **(IDENTITY if caesar else {}), "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout


def make_project(path: Path, base: str = "main") -> Path:
    """A repository on ``base`` with two commits, a remote ``origin`` and one file Caesar
    is still editing (uncommitted)."""
    path.mkdir(parents=True)
    git(path, "init", "--quiet", "-b", base)
    (path / "app.py").write_text("def add(a, b):\n    return a - b\n")
    (path / "README.md").write_text("# app\n")
    git(path, "add", ".")
    git(path, "commit", "--quiet", "-m", "first")
    (path / "test_app.py").write_text("from app import add\n\nassert add(2, 2) == 4\n")
    git(path, "add", ".")
    git(path, "commit", "--quiet", "-m", "a test")
    git(path, "remote", "add", "origin", "https://example.invalid/caesar/app.git")
    (path / "notes.txt").write_text("Caesar's own work in progress\n")
    return path


def snapshot(repo: Path) -> dict[str, str]:
    """What Caesar would notice changing in his checkout: files, branches, config, HEAD."""
    files = {
        str(p.relative_to(repo)): p.read_text(errors="replace")
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }
    return {
        **files,
        ".git/config": (repo / ".git" / "config").read_text(),
        "HEAD": git(repo, "rev-parse", "HEAD"),
        "branches": git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads"),
        "status": git(repo, "status", "--porcelain"),
    }
