"""Projects with real git: each agent's own copy and branch, publishing, /diff's data, the fence
against a copy's own git config, and bad input."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from legio.castra import Castra
from legio.config import load_config
from legio.errors import ConfigError, ProjectError
from legio.projects import gitsafe
from legio.projects.copies import Projects, find_tags
from legio.projects.overview import check_projects, diff, overview
from tests.gitrepo import git, make_project, snapshot


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "app")


@pytest.fixture
def projects(castra_dir: Path, project: Path) -> Projects:
    path = castra_dir.parent / "legio.toml"
    path.write_text(f'[projects.app]\npath = "{project}"\n')
    config = load_config(path)
    return Projects(config, Castra(config.castra))


def test_hashtags_pick_a_project_and_unknown_ones_are_refused(projects: Projects) -> None:
    assert find_tags("@vorenus #App fix it, C# and a#b are not tags, #x-1 is") == ["app", "x-1"]
    assert projects.pick("@vorenus #app fix the test") == ("app", None)
    assert projects.pick("@vorenus fix the test") == (None, None)
    project, problem = projects.pick("@vorenus #ap fix it")
    assert project is None and problem is not None
    assert "#ap is not a project" in problem and "#app" in problem
    empty = Projects(projects.config.model_copy(update={"projects": {}}), projects.castra)
    assert empty.pick("#urgent please") == (None, None)  # no projects: a #word is a word


async def test_each_agent_gets_its_own_copy_on_its_own_branch(
    projects: Projects, project: Path
) -> None:
    before = snapshot(project)
    vorenus = await projects.place("vorenus", "app")
    pullo = await projects.place("pullo", "app")
    assert vorenus.copy != pullo.copy
    assert vorenus.branch == "legio/vorenus/main" and pullo.branch == "legio/pullo/main"
    assert git(vorenus.copy, "rev-parse", "--abbrev-ref", "HEAD").strip() == vorenus.branch
    assert (vorenus.copy / "app.py").read_text() == (project / "app.py").read_text()
    assert not (vorenus.copy / "notes.txt").exists()  # Caesar's uncommitted work stays his
    alternates = (vorenus.copy / ".git" / "objects" / "info" / "alternates").read_text()
    assert alternates.strip() == str(project / ".git" / "objects")
    remotes = git(vorenus.copy, "remote", "-v")
    assert "https://example.invalid/caesar/app.git" in remotes  # pushes go to his remotes

    (vorenus.copy / "app.py").write_text("def add(a, b):\n    return a + b\n")
    git(vorenus.copy, "commit", "--quiet", "-am", "fix add", caesar=False)
    assert not (pullo.copy / "app.py").read_text().endswith("a + b\n")  # parallel, unseen

    assert await projects.publish(vorenus) is True
    assert await projects.publish(vorenus) is False  # nothing new
    assert await projects.publish(pullo) is False  # no commit: no branch
    after = snapshot(project)
    branches = after.pop("branches")
    before.pop("branches")
    assert after == before  # his files, HEAD, config and status untouched
    assert "refs/heads/legio/vorenus/main" in branches
    assert "refs/heads/legio/pullo/main" not in branches
    assert git(project, "log", "-1", "--format=%an %s", "legio/vorenus/main") == (
        "vorenus (Legio) fix add\n"
    )
    assert git(project, "rev-parse", "main") == git(project, "rev-parse", "main~0")


async def test_diff_and_overview_show_the_work(projects: Projects, project: Path) -> None:
    place = await projects.place("vorenus", "app")
    (place.copy / "app.py").write_text("def add(a, b):\n    return a + b\n")
    git(place.copy, "commit", "--quiet", "-am", "fix add")
    (place.copy / "README.md").write_text("# app\n\nfixed\n")  # not committed
    (place.copy / "new.py").write_text("x = 1\n")  # not added
    git(project, "commit", "--quiet", "--allow-empty", "-m", "Caesar moved on")  # base moved

    report = await diff(projects, place)  # published first: what Caesar would merge
    work = report.work
    assert work is not None and [c.subject for c in work.commits] == ["fix add"]
    assert work.commits[0].author == "Caesar"
    assert (work.ahead, work.behind) == (1, 1)
    assert (work.file_count, work.added, work.removed) == (1, 1, 1)
    assert "+    return a + b" in report.text and "+fixed" not in report.text
    assert report.copy.uncommitted == ["M README.md", "?? new.py"]  # listed apart
    assert git(project, "rev-parse", "legio/vorenus/main") == git(place.copy, "rev-parse", "HEAD")

    [state] = await overview(projects)
    assert state.name == "app" and state.base == "main"
    [copy] = state.copies
    assert (copy.agent, copy.ahead, copy.behind, copy.uncommitted) == ("vorenus", 1, 1, 2)
    assert copy.last == "fix add"


async def test_legio_never_runs_what_a_copy_config_names(
    projects: Projects, project: Path, tmp_path: Path
) -> None:
    place = await projects.place("vorenus", "app")
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.sh"
    evil.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\ncat\n')
    evil.chmod(evil.stat().st_mode | stat.S_IXUSR)
    hook = place.copy / ".git" / "hooks" / "reference-transaction"
    hook.write_text(evil.read_text())
    hook.chmod(0o755)
    with (place.copy / ".git" / "config").open("a") as config:
        config.write(
            f"[core]\n\tfsmonitor = {evil}\n\tpager = {evil}\n"
            f'[diff]\n\texternal = {evil}\n[diff "evil"]\n\ttextconv = {evil}\n'
            f'\tcommand = {evil}\n[filter "evil"]\n\tclean = {evil}\n\tsmudge = {evil}\n'
            f"\tprocess = {evil}\n\trequired = true\n"
            f"[log]\n\tshowSignature = true\n[gpg]\n\tprogram = {evil}\n"
            f"[pager]\n\tdiff = {evil}\n\tlog = {evil}\n[include]\n\tpath = {tmp_path}/more\n"
        )
    (tmp_path / "more").write_text(f'[filter "more"]\n\tclean = {evil}\n')
    (place.copy / ".gitattributes").write_text("* diff=evil filter=evil\n*.py filter=more\n")
    (place.copy / "app.py").write_text("changed\n")

    report = await diff(projects, place)
    [state] = await overview(projects)
    hook.write_text("#!/bin/sh\nexit 1\n")  # would refuse a ref update if it ran
    assert "M app.py" in report.copy.uncommitted and report.copy.problem is None
    assert state.copies[0].uncommitted >= 1
    # the agent commits inside its sandbox; here as plain git (hooks off, as Legio's own)
    git(place.copy, "-c", "core.hooksPath=/dev/null", "-c", "filter.evil.required=false",
        "-c", "filter.evil.clean=", "-c", "filter.evil.process=", "-c", "filter.more.clean=",
        "-c", "core.fsmonitor=false", "commit", "--quiet", "-am", "work")  # fmt: skip
    assert await projects.publish(place) is True
    assert not marker.exists(), marker.read_text()


async def test_drop_removes_the_copy_and_the_branch_carries_on(
    projects: Projects, project: Path
) -> None:
    place = await projects.place("vorenus", "app")
    (place.copy / "app.py").write_text("fixed\n")
    git(place.copy, "commit", "--quiet", "-am", "fix")
    await projects.publish(place)
    assert await projects.drop("vorenus", "app") is True
    assert not place.copy.exists()
    assert await projects.drop("vorenus", "app") is False
    assert "legio/vorenus/main" in git(project, "branch", "--list", "legio/*")
    again = await projects.place("vorenus", "app")  # continues its branch, not base
    assert (again.copy / "app.py").read_text() == "fixed\n"


async def test_bad_projects_are_named_and_a_failed_clone_leaves_nothing(
    projects: Projects, project: Path, castra_dir: Path
) -> None:
    with pytest.raises(ProjectError, match="#nope is not a project"):
        await projects.place("vorenus", "nope")
    # a clone that fails half-way (a blob missing from the project): nothing half-made
    blob = git(project, "rev-parse", "HEAD:app.py").strip()
    obj = project / ".git" / "objects" / blob[:2] / blob[2:]
    saved = obj.read_bytes()
    obj.chmod(0o644)
    obj.unlink()
    with pytest.raises(ProjectError):
        await projects.place("vorenus", "app")
    copies = castra_dir / "centuriones" / "vorenus" / "projects"
    assert list(copies.iterdir()) == []
    obj.write_bytes(saved)
    assert (await projects.place("vorenus", "app")).copy.is_dir()

    git(project, "checkout", "--quiet", "--detach")
    other = Projects(projects.config.model_copy(deep=True), projects.castra)
    with pytest.raises(ProjectError, match="detached HEAD"):
        await other.place("pullo", "app")
    other.config.projects["app"].base = "trunk"
    with pytest.raises(ProjectError, match="base branch 'trunk' is not in"):
        await other.place("pullo", "app")
    lines = await check_projects(other.config, other.castra)
    assert ("bad", f"project #app: the base branch 'trunk' is not in {project}") in lines

    os.rename(project, project.with_name("moved"))
    with pytest.raises(ProjectError, match=r"is gone; fix \[projects.app\] path"):
        await projects.place("vorenus", "app")
    with pytest.raises(ProjectError, match="not a git repository"):
        await gitsafe.run(castra_dir, "status")


def test_legio_check_lists_projects_and_refuses_what_is_wrong(
    castra_dir: Path, project: Path, tmp_path: Path
) -> None:
    from legio.cli import check_config

    inside = make_project(castra_dir / "inner")
    path = castra_dir.parent / "legio.toml"
    path.write_text(
        f'[projects.app]\npath = "{project}"\n[projects.inner]\npath = "{inside}"\n'
        f'[projects.gone]\npath = "{tmp_path / "nowhere"}"\n'
    )
    prompt = castra_dir / "centuriones" / "pullo" / "prompt.md"
    prompt.write_text(prompt.read_text().replace("---\n", "---\nproject: ap\n", 1))
    prompt = castra_dir / "centuriones" / "vorenus" / "prompt.md"
    prompt.write_text(prompt.read_text().replace("---\n", f"---\nadd_dirs: [{project}]\n", 1))
    report = check_config(load_config(path), is_root=False)
    text = "\n".join(report.lines)
    assert report.failed
    assert f"✓ project #app: {project} (base main; no copies yet)" in text
    assert f"✗ project #inner: {inside} overlaps the castra" in text
    assert f"✗ project #gone: {tmp_path / 'nowhere'} is gone" in text
    assert "project 'ap' is not in [projects] (the projects: #app, #gone, #inner)" in text
    assert f"! vorenus's add_dirs {project} holds project #app: read-only to agents" in text
    bad = castra_dir.parent / "bad.toml"
    bad.write_text('[projects.My_App]\npath = "/x"\n')
    with pytest.raises(ConfigError, match=r"project names \['My_App'\] must be 1-32 char"):
        load_config(bad)
    bad.write_text('[projects.ok]\npath = "/y"\nbase = "-x"\n')
    with pytest.raises(ConfigError, match=r"projects.ok.base: must be a branch name"):
        load_config(bad)


async def test_a_copy_made_a_partial_clone_cannot_make_legio_fetch_with_its_command(
    projects: Projects, project: Path, tmp_path: Path
) -> None:
    place = await projects.place("vorenus", "app")
    marker = tmp_path / "pwned"
    (place.copy / "app.py").write_text("changed\n")
    git(place.copy, "commit", "--quiet", "-am", "work", caesar=False)
    head = git(place.copy, "rev-parse", "HEAD").strip()
    (place.copy / ".git" / "objects" / head[:2] / head[2:]).unlink()  # now "missing"
    with (place.copy / ".git" / "config").open("a") as config:
        config.write(
            f"[core]\n\trepositoryformatversion = 1\n[extensions]\n\tpartialClone = evil\n"
            f'[remote "evil"]\n\turl = {project}\n\tpromisor = true\n'
            f"\tuploadpack = touch {marker}; git-upload-pack\n"
        )
    report = await diff(projects, place)
    assert report.work is None and report.copy.problem  # the missing commit is not fetched
    await overview(projects)
    assert await projects.publish(place) is False  # its head is "missing": nothing to publish
    assert not marker.exists()


async def test_a_huge_diff_is_cut_not_held_whole(projects: Projects) -> None:
    place = await projects.place("vorenus", "app")
    line = "x" * 99 + "\n"
    for i in range(4):  # 26 MB of changes, each file under core.bigFileThreshold (8 MB)
        (place.copy / f"part{i}.py").write_text(line * 65_000)
    git(place.copy, "add", ".", caesar=False)
    git(place.copy, "commit", "--quiet", "-m", "huge", caesar=False)
    report = await diff(projects, place)
    assert report.work is not None and report.work.cut
    assert len(report.text.encode()) <= gitsafe.MAX_OUTPUT
