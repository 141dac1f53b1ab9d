"""Undo in git (``legio.projects.undoing``) on real repositories: the copy's work kept as
one commit under Legio's ref without running anything the copy's config names (a clean or
smudge filter, a hook), and a project branch that moved meanwhile is never overwritten."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from legio.errors import ProjectError
from legio.projects import undoing
from legio.projects.copies import Place
from legio.projects.publishing import publish
from legio.projects.undoing import Kept
from tests.gitrepo import git, make_project
from tests.test_undo_bot import old_kept_ref

BRANCH = "legio/vorenus/main"


def copy_of(project: Path, tmp_path: Path) -> Place:
    copy = tmp_path / "copy"
    git(tmp_path, "clone", "-q", "--shared", str(project), str(copy))
    git(copy, "checkout", "-q", "-b", BRANCH)
    git(copy, "config", "user.name", "vorenus")
    git(copy, "config", "user.email", "v@legio.invalid")
    return Place("app", "vorenus", project, "main", BRANCH, copy, BRANCH)


def plant(copy: Path, marker: Path) -> None:
    """What an agent could leave in its copy for Legio's git to run (its config is
    fenced from the agent; Legio does not trust it anyway)."""
    for key in ("filter.evil.clean", "filter.evil.smudge"):
        git(copy, "config", key, f"sh -c 'touch {marker}; cat'")
    hook = copy / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    os.chmod(hook, 0o755)
    (copy / ".gitattributes").write_text("* filter=evil\n")


async def test_keep_and_rewind_run_nothing_of_the_copy(tmp_path: Path) -> None:
    project = make_project(tmp_path / "app")
    place = copy_of(project, tmp_path)
    start = git(project, "rev-parse", "main").strip()
    marker = tmp_path / "ran"
    (place.copy / "app.py").write_text("def add(a, b):\n    return a + b\n")
    git(place.copy, "commit", "-qam", "fix", caesar=False)
    plant(place.copy, marker)
    (place.copy / "draft.txt").write_text("draft\n")
    assert await publish(project, place.copy, "vorenus", BRANCH, "main", 100)
    end = git(project, "rev-parse", BRANCH).strip()
    kept = Kept(1, "vorenus", "app", BRANCH, start, end, 2, "", 0.0)

    commit = await undoing.keep(place, kept, 100)
    await undoing.rewind(place, kept)
    assert not marker.exists()  # no filter, no hook ran
    assert git(project, "rev-parse", BRANCH).strip() == start
    assert git(project, "show", f"{commit}:draft.txt") == "draft\n"
    assert git(project, "rev-parse", "refs/legio/undo/vorenus/1").strip() == commit
    assert not (place.copy / "draft.txt").exists()
    [listed] = await undoing.kept(project)
    assert (listed.card, listed.branch, listed.from_tip, listed.to_tip) == (1, BRANCH, start, end)
    assert listed.uncommitted == 2 and listed.commit == commit

    await undoing.restore(place, listed)
    assert not marker.exists()
    assert git(project, "rev-parse", BRANCH).strip() == end
    assert (place.copy / "draft.txt").read_text() == "draft\n"
    assert not await undoing.kept(project)
    git(place.copy, "add", "-A")  # plain git would have run the planted filter
    assert marker.exists()


async def test_a_branch_that_moved_meanwhile_is_not_overwritten(tmp_path: Path) -> None:
    project = make_project(tmp_path / "app")
    place = copy_of(project, tmp_path)
    start = git(project, "rev-parse", "main").strip()
    (place.copy / "one.py").write_text("x = 1\n")
    git(place.copy, "add", "one.py", caesar=False)
    git(place.copy, "commit", "-qm", "one", caesar=False)
    assert await publish(project, place.copy, "vorenus", BRANCH, "main", 100)
    end = git(project, "rev-parse", BRANCH).strip()
    kept = Kept(1, "vorenus", "app", BRANCH, start, end, 0, "", 0.0)
    await undoing.keep(place, kept, 100)
    elsewhere = git(project, "rev-parse", "HEAD~1").strip()
    git(project, "update-ref", f"refs/heads/{BRANCH}", elsewhere)  # moved by someone else
    with pytest.raises(ProjectError, match="moved"):
        await undoing.rewind(place, kept)
    assert (place.copy / "one.py").exists()  # the copy is left as it was
    assert git(place.copy, "rev-parse", "HEAD").strip() == end
    assert git(project, "rev-parse", BRANCH).strip() == elsewhere


async def test_a_kept_turn_over_the_size_limit_is_not_undone(tmp_path: Path) -> None:
    project = make_project(tmp_path / "app")
    place = copy_of(project, tmp_path)
    start = git(project, "rev-parse", "main").strip()
    (place.copy / "big.bin").write_bytes(os.urandom(300_000))
    kept = Kept(1, "vorenus", "app", BRANCH, start, start, 1, "", 0.0)
    with pytest.raises(ProjectError, match="max_publish_mb"):
        await undoing.keep(place, kept, 0.1)
    assert not git(project, "for-each-ref", "refs/legio/undo/")
    assert (place.copy / "big.bin").exists()


async def test_a_second_keep_of_a_card_goes_beside_the_first_and_prune_goes_by_date(
    tmp_path: Path,
) -> None:
    """Card 7 kept 15 days ago, then kept again now: the new keep is ``…/7-2`` (the old
    one is not overwritten); prune removes the old one by its date, and the name it freed
    is used again; restoring one keep leaves the other."""
    project = make_project(tmp_path / "app")
    place = copy_of(project, tmp_path)
    start = git(project, "rev-parse", "main").strip()
    old_ref = old_kept_ref(project, days=15, card=7)
    old = git(project, "rev-parse", old_ref).strip()
    (place.copy / "draft.txt").write_text("draft\n")
    kept = Kept(7, "vorenus", "app", BRANCH, start, start, 1, "", 0.0)
    second = await undoing.keep(place, kept, 100)
    assert git(project, "rev-parse", old_ref).strip() == old
    assert git(project, "rev-parse", f"{old_ref}-2").strip() == second
    labels = {k.label: k.commit for k in await undoing.kept(project)}
    assert labels == {"7": old, "7-2": second}

    assert await undoing.prune(project) == 1  # by date: the 15-day-old one, whatever its name
    [left] = await undoing.kept(project)
    assert (left.label, left.nth, left.commit) == ("7-2", 2, second)
    (place.copy / "draft.txt").write_text("draft two\n")
    third = await undoing.keep(place, kept, 100)
    assert git(project, "rev-parse", old_ref).strip() == third  # the freed name, new work

    git(place.copy, "reset", "-q", "--hard", start, caesar=False)
    git(place.copy, "clean", "-fdq", caesar=False)
    [restored] = [k for k in await undoing.kept(project) if k.label == "7-2"]
    await undoing.restore(place, restored)
    assert (place.copy / "draft.txt").read_text() == "draft\n"
    assert [k.label for k in await undoing.kept(project)] == ["7"]
