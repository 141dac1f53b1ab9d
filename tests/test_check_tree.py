"""A check runs on exactly the commit it is recorded for (issue 44, item 2): the agent's
work tree can say anything (a file marked ``skip-worktree`` or ``assume-unchanged`` with
the old content put back, a ``.gitattributes`` filter of its own that rewrites what is
checked out), the check sees a clean tree of that commit made by Legio's own git. Only a
check asked for on the uncommitted work runs in the work tree, and it says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from legio.frontends.checkviews import check_part, check_report
from legio.store.checkstore import CheckRecord
from tests.gitrepo import git
from tests.test_checks import PY, Bench, BenchFactory, bench  # noqa: F401 (the fixture)

GOOD = "def add(a, b):\n    return a + b\n"
BAD = "def add(a, b):\n    return a * b + 1\n"  # add(2, 2) == 5: the check fails
CHECK = f"{PY} test_app.py"  # make_project's test: assert add(2, 2) == 4


def commit(copy: Path, message: str) -> str:
    git(copy, "add", "-A", caesar=False)
    git(copy, "commit", "--quiet", "-m", message, caesar=False)
    return git(copy, "rev-parse", "HEAD").strip()


async def published(b: Bench) -> None:
    await b.checks.projects.publish(b.place)


async def check(b: Bench, commit: str) -> CheckRecord:
    return await (await b.checks.start("vorenus", "app", b.copy, commit)).wait()


@pytest.mark.parametrize("flag", ["--skip-worktree", "--assume-unchanged"])
async def test_a_failing_commit_hidden_by_its_index_fails_its_check(
    bench: BenchFactory,  # noqa: F811
    flag: str,
) -> None:
    """The exact attack: commit failing code, mark the file in the index, put the passing
    content back in the work tree (``git status`` is clean). The check of that commit
    fails, and says which commit it checked."""
    b = await bench(CHECK)
    (b.copy / "app.py").write_text(GOOD)
    good = commit(b.copy, "fix add")
    await published(b)
    assert (await check(b, good)).state == "passed"

    (b.copy / "app.py").write_text(BAD)
    bad = commit(b.copy, "refactor add")
    git(b.copy, "update-index", flag, "app.py", caesar=False)
    (b.copy / "app.py").write_text(GOOD)
    assert git(b.copy, "status", "--porcelain", caesar=False) == ""
    await published(b)

    record = await check(b, bad)
    assert record.state == "failed", record.tail
    assert record.commit == bad and not record.uncommitted
    assert "AssertionError" in record.tail
    assert check_part(record).endswith(f"on {bad[:7]}")
    assert (b.copy / "app.py").read_text() == GOOD  # the agent's work tree left as it was


async def test_a_smudge_filter_of_the_agents_does_not_run(
    bench: BenchFactory,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The committed ``.gitattributes`` names a filter the copy's own config defines, whose
    smudge writes the passing content on checkout: the clean tree is made without any
    config of the agent's, so the commit's own content is what runs."""
    b = await bench(CHECK)
    good_file = tmp_path / "good.py"
    good_file.write_text(GOOD)
    ran = tmp_path / "smudge-ran"
    git(b.copy, "config", "filter.evil.smudge", f"touch {ran}; cat {good_file}", caesar=False)
    git(b.copy, "config", "filter.evil.clean", "cat", caesar=False)
    (b.copy / ".gitattributes").write_text("app.py filter=evil\n")
    (b.copy / "app.py").write_text(BAD)
    bad = commit(b.copy, "refactor add")
    (b.copy / "app.py").unlink()
    git(b.copy, "checkout", "--", "app.py", caesar=False)
    assert (b.copy / "app.py").read_text() == GOOD and ran.exists()  # the trick works
    ran.unlink()
    await published(b)

    record = await check(b, bad)
    assert record.state == "failed", record.tail
    assert record.commit == bad and not ran.exists()


async def test_the_clean_tree_has_the_commit_and_its_history_read_only(
    bench: BenchFactory,  # noqa: F811
) -> None:
    """In the clean tree git works (the commit is HEAD, detached), nothing uncommitted of
    the copy is there, and the project's objects cannot be written."""
    b = await bench(
        "git rev-parse HEAD && git status --porcelain && ls && "
        "(touch $(git rev-parse --git-path objects)/../../x 2>/dev/null; true) && "
        "for d in $(cat .git/objects/info/alternates); do "
        "touch $d/planted 2>/dev/null && echo WROTE-OBJECTS; done; true"
    )
    (b.copy / "app.py").write_text(GOOD)
    good = commit(b.copy, "fix add")
    (b.copy / "uncommitted.txt").write_text("not committed\n")
    await published(b)
    record = await check(b, good)
    assert record.state == "passed", record.tail
    assert good in record.tail
    assert "uncommitted.txt" not in record.tail and "app.py" in record.tail
    assert "WROTE-OBJECTS" not in record.tail
    assert not (b.project / ".git" / "objects" / "planted").exists()


async def test_a_commit_the_project_lacks_is_not_checked(bench: BenchFactory) -> None:  # noqa: F811
    """A commit not in the project (not published, or a made-up id) is not checked at all:
    the run says so, nothing is run in the work tree instead."""
    b = await bench("echo RAN")
    record = await check(b, "c0ffee" * 6 + "abcd")
    assert record.state == "error" and "RAN" not in record.tail
    assert record.detail is not None and "not in #app" in record.detail


async def test_uncommitted_work_is_checked_only_on_request_and_labelled(
    bench: BenchFactory,  # noqa: F811
) -> None:
    b = await bench(CHECK)
    head = git(b.copy, "rev-parse", "HEAD").strip()
    (b.copy / "app.py").write_text(GOOD)  # not committed
    run = await b.checks.start("vorenus", "app", b.copy, uncommitted=True)
    record = await run.wait()
    assert record.state == "passed" and record.uncommitted and record.commit == head
    assert check_part(record).endswith(f"on uncommitted work (over {head[:7]})")
    assert "uncommitted work" in check_report(record).splitlines()[0]
    stored = await b.store.get(record.id)
    assert stored is not None and stored.uncommitted and stored.commit == head


async def test_a_newer_check_gets_its_own_clean_tree(bench: BenchFactory) -> None:  # noqa: F811
    """A newer turn's check supersedes the older one at once: each has its own tree, so the
    older one's removal never takes the newer one's files; none is left after."""
    b = await bench(f"sleep 1; {CHECK}")
    (b.copy / "app.py").write_text(GOOD)
    good = commit(b.copy, "fix add")
    await published(b)
    first = await b.checks.start("vorenus", "app", b.copy, good)
    second = await b.checks.start("vorenus", "app", b.copy, good)
    assert (await first.wait()).state == "cancelled"
    assert (await second.wait()).state == "passed"
    base = b.root / "state" / "checks" / "vorenus" / "app"
    assert not list(base.glob("tree-*"))


async def test_a_cache_seeded_by_an_uncommitted_run_is_not_seen_by_a_commits_check(
    bench: BenchFactory,  # noqa: F811
) -> None:
    """A run of the agent's uncommitted work writes into ``XDG_CACHE_HOME`` (a tool's
    "ok (cached)"); the check of a commit starts with an empty cache, so what the agent's
    run left there cannot make a failing commit pass."""
    b = await bench(
        f'if [ -f "$XDG_CACHE_HOME/verdict" ]; then echo SEEN; exit 0; fi; '
        f'echo ok > "$XDG_CACHE_HOME/verdict"; {CHECK}'
    )
    (b.copy / "app.py").write_text(GOOD)
    seeded = await (await b.checks.start("vorenus", "app", b.copy, uncommitted=True)).wait()
    assert seeded.state == "passed", seeded.tail
    (b.copy / "app.py").write_text(BAD)
    bad = commit(b.copy, "refactor add")
    await published(b)
    record = await check(b, bad)
    assert record.state == "failed", record.tail
    assert "SEEN" not in record.tail


async def test_a_commit_over_check_tree_mb_is_not_checked_out(
    bench: BenchFactory,  # noqa: F811
) -> None:
    """The commit's files are measured from its objects before the clean tree is made:
    one over ``[sandbox] check_tree_mb`` is an error saying so, never written to disk."""
    b = await bench(CHECK, sandbox="check_tree_mb = 1\n")
    (b.copy / "app.py").write_text(GOOD)
    (b.copy / "blob.bin").write_bytes(bytes(3 << 20))  # 3 MB, a few KB compressed
    big = commit(b.copy, "a big file")
    await published(b)
    record = await check(b, big)
    assert record.state == "error" and "check_tree_mb" in (record.detail or ""), record.detail
    base = b.root / "state" / "checks" / "vorenus" / "app"
    assert not list(base.glob("tree-*"))
