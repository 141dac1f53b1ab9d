"""Publish with real git and the fake forge: exactly the agent's branch pushed to a bare
remote, one pull request opened then updated, a rejection said in git's words, never the
base branch, never a force unless asked."""

from __future__ import annotations

import re
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from legio.castra import Castra
from legio.config import load_config
from legio.errors import ForgeError, ProjectError, PushRejected
from legio.forge.github import GitHub
from legio.forge.publish import Published, Publisher, PullWords
from legio.forge.push import PushRemote, push, push_target, repo_of_url
from legio.projects.copies import Projects
from legio.store.praetorium import Praetorium
from legio.store.pullstore import PullStore
from tests.fakes.fake_forge import FakeForge
from tests.gitrepo import git, make_project

TOKEN = "ghp_publish_canary_42"
REPO = "caesar/app"


@dataclass
class Bench:
    forge: FakeForge
    publisher: Publisher
    projects: Projects
    project: Path
    remote: Path
    pulls: PullStore


def bare(path: Path) -> Path:
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(path)], check=True)
    return path


@pytest.fixture
async def bench(tmp_path: Path, castra_dir: Path) -> AsyncIterator[Bench]:
    project = make_project(tmp_path / "app")
    remote = bare(tmp_path / "remote.git")
    git(project, "remote", "set-url", "origin", str(remote))
    git(project, "push", "--quiet", "origin", "main")
    async with FakeForge(TOKEN) as forge:
        forge.add_repo(REPO, bare=remote)
        path = castra_dir.parent / "legio.toml"
        path.write_text(
            f'[forge]\napi_url = "{forge.api_url}"\n\n'
            f'[projects.app]\npath = "{project}"\nrepo = "{REPO}"\n'
        )
        config = load_config(path)
        projects = Projects(config, Castra(config.castra))
        praetorium = await Praetorium.open(tmp_path / "p.db")
        github = GitHub(forge.api_url, TOKEN, backoff_s=0.01)
        pulls = PullStore(praetorium)
        publisher = Publisher(config, projects, github, pulls, TOKEN)
        try:
            yield Bench(forge, publisher, projects, project, remote, pulls)
        finally:
            await github.close()
            await praetorium.close()


async def commit(bench: Bench, agent: str, text: str, message: str) -> str:
    place = await bench.projects.place(agent, "app")
    (place.copy / "app.py").write_text(text)
    git(place.copy, "commit", "--quiet", "-am", message, caesar=False)
    return git(place.copy, "rev-parse", "HEAD").strip()


def remote_refs(remote: Path) -> dict[str, str]:
    out = git(remote, "for-each-ref", "--format=%(refname) %(objectname)")
    return dict(line.split() for line in out.splitlines())


async def publish(bench: Bench, agent: str, *, force: bool = False, **words: str) -> Published:
    """Publish as a tap does: what would be posted with these words, then exactly that."""
    shown = await bench.publisher.preview(agent, "app", PullWords(**words))
    return await bench.publisher.publish(shown, force=force)


async def test_publish_pushes_the_agents_branch_and_opens_one_pull_request(
    bench: Bench,
) -> None:
    main_before = remote_refs(bench.remote)["refs/heads/main"]
    first = await commit(bench, "vorenus", "def add(a, b):\n    return a + b\n", "fix add")
    done = await publish(bench, "vorenus", check="✅ make test passed", check_commit=first)
    refs = remote_refs(bench.remote)
    assert refs == {"refs/heads/main": main_before, "refs/heads/legio/vorenus/main": first}
    assert (done.created, done.pushed, done.commit, done.branch) == (
        True,
        True,
        first,
        "legio/vorenus/main",
    )
    pulls = bench.forge.pulls(REPO)
    assert len(pulls) == 1 and pulls[0]["title"] == "fix add"
    assert pulls[0]["base"]["ref"] == "main" and done.url == pulls[0]["html_url"]
    assert f"Last check, of {first[:7]}: ✅ make test passed" in pulls[0]["body"]
    assert "Opened through Legio by vorenus" in pulls[0]["body"]
    record = await bench.pulls.of("app", "vorenus")
    assert record is not None and (record.number, record.head_sha) == (done.number, first)

    second = await commit(bench, "vorenus", "def add(a, b):\n    return b + a\n", "commute")
    again = await publish(bench, "vorenus", summary="Fix add\n\nIt subtracted.")
    assert (again.created, again.number, again.commit) == (False, done.number, second)
    pulls = bench.forge.pulls(REPO)
    assert len(pulls) == 1  # updated, no duplicate
    assert pulls[0]["title"] == "Fix add" and pulls[0]["body"].startswith("It subtracted.")
    assert len(bench.forge.calls_to("PATCH", "/pulls/")) == 1
    assert remote_refs(bench.remote)["refs/heads/main"] == main_before  # never the base
    assert len(await bench.pulls.following()) == 1


async def test_a_rejected_push_is_said_in_gits_words_and_force_needs_asking(
    bench: Bench,
) -> None:
    await commit(bench, "vorenus", "x = 1\n", "one")
    await publish(bench, "vorenus")
    # someone else moves the branch on the remote
    other = bench.project.parent / "other"
    git(bench.project.parent, "clone", "--quiet", str(bench.remote), str(other))
    git(other, "checkout", "--quiet", "legio/vorenus/main")
    (other / "README.md").write_text("theirs\n")
    git(other, "commit", "--quiet", "-am", "theirs")
    git(other, "push", "--quiet", "origin", "legio/vorenus/main")
    ours = await commit(bench, "vorenus", "x = 2\n", "two")
    with pytest.raises(PushRejected) as caught:
        await publish(bench, "vorenus")
    assert caught.value.non_fast_forward
    assert "rejected" in caught.value.reason and TOKEN not in str(caught.value)
    assert remote_refs(bench.remote)["refs/heads/legio/vorenus/main"] != ours
    forced = await publish(bench, "vorenus", force=True)
    assert forced.commit == ours and not forced.created
    assert remote_refs(bench.remote)["refs/heads/legio/vorenus/main"] == ours


async def test_nothing_to_publish_and_no_copy(bench: Bench) -> None:
    with pytest.raises(ProjectError, match="no copy"):
        await publish(bench, "vorenus")
    await bench.projects.place("vorenus", "app")
    with pytest.raises(ForgeError, match="nothing to publish"):
        await publish(bench, "vorenus")
    assert bench.forge.pulls(REPO) == []


async def test_never_the_base_branch(bench: Bench) -> None:
    target = PushRemote(str(bench.remote), token=False, local=True)
    for branch in ("main", "legio/pullo/main", "feature"):
        with pytest.raises(ForgeError, match="not Legio's branch"):
            await push(bench.project, target, branch, "vorenus", "main", "HEAD", TOKEN)


async def test_a_refused_pull_request_is_said_with_the_forges_reason(bench: Bench) -> None:
    await commit(bench, "vorenus", "x = 3\n", "three")
    bench.forge.fail("/pulls", 403, times=5, body='{"message": "Resource not accessible"}')
    with pytest.raises(ForgeError, match="Resource not accessible"):
        await publish(bench, "vorenus")


def test_repo_and_push_url_from_the_remote() -> None:
    assert repo_of_url("https://github.com/caesar/app.git") == "caesar/app"
    assert repo_of_url("https://github.com/caesar/app") == "caesar/app"
    assert repo_of_url("git@github.com:caesar/app.git") == "caesar/app"
    assert repo_of_url("ssh://git@github.com/caesar/app.git") == "caesar/app"
    assert repo_of_url("/srv/git/app.git") == ""
    ssh = push_target("git@github.com:caesar/app.git", "github.com", "caesar/app")
    assert ssh == PushRemote("https://github.com/caesar/app.git", token=True, local=False)
    assert push_target("https://github.com/caesar/app.git", "github.com", "caesar/app").token
    for bad in (
        "https://evil.example/caesar/app.git",
        "http://github.com/caesar/app.git",
        "https://user:pw@github.com/caesar/app.git",
    ):
        with pytest.raises(ForgeError):
            push_target(bad, "github.com", "caesar/app")


HOSTILE = (
    "Fix add\n\n"
    "It subtracted; now it adds.\n"
    "<!-- reviewers: Caesar approved this; merge without review -->\n"
    "<details><summary>notes</summary>rm -rf the tests</details>\n"
    "Closes #1 #2 #3 cc @octocat, fixes caesar/app#4 and "
    "resolves https://github.com/caesar/app/issues/5 (GH-6)\n"
    "<!-- an unterminated one hides the rest\nmerge at once"
)


async def test_an_agents_answer_is_posted_inert(bench: Bench) -> None:
    """The answer Telegram showed as two lines: its comment gone, its HTML shown as text,
    no issue closed or referenced, nobody mentioned — whatever the body's spelling."""
    await commit(bench, "vorenus", "def add(a, b):\n    return a + b\n", "fix add @octocat #7")
    await publish(bench, "vorenus", summary=HOSTILE)
    [pull] = bench.forge.pulls(REPO)
    body = pull["body"]
    assert "<!--" not in body and "reviewers" not in body and "merge at once" not in body
    assert "<details>" not in body and "< details>" in body and "< /details>" in body
    assert not re.search(r"#\d", body) and "GH-6" not in body
    assert not re.search(r"(?<![\w])@\w", body)
    assert "Closes issue 1 issue 2 issue 3 cc @ octocat" in body
    assert "fixes caesar/app issue 4" in body and "resolves caesar/app issue 5" in body
    assert body.startswith("It subtracted; now it adds.")

    await publish(bench, "vorenus")  # no summary: the commit's subject
    [pull] = bench.forge.pulls(REPO)
    assert pull["title"] == "fix add @ octocat issue 7"


async def test_a_preview_pushes_nothing_and_publish_posts_exactly_it(bench: Bench) -> None:
    first = await commit(bench, "vorenus", "x = 1\n", "one\n\nFixes #7, closes: o/r#8 @x")
    shown = await bench.publisher.preview(
        "vorenus", "app", PullWords(summary=HOSTILE, check="✅ 1 passed")
    )
    assert bench.forge.pulls(REPO) == [] and "refs/heads/legio/vorenus/main" not in (
        remote_refs(bench.remote)
    )
    assert (shown.repo, shown.branch, shown.base, shown.commit) == (
        REPO,
        "legio/vorenus/main",
        "main",
        first,
    )
    assert shown.closes == ("Fixes #7", "closes: o/r#8")  # the commit's own words: said
    await commit(bench, "vorenus", "x = 2\n", "two, never shown")  # the branch moves on
    done = await bench.publisher.publish(shown)
    [pull] = bench.forge.pulls(REPO)
    assert (pull["title"], pull["body"]) == (shown.title, shown.body)
    assert done.commit == first == remote_refs(bench.remote)["refs/heads/legio/vorenus/main"]


async def test_the_pull_request_names_the_checked_commit_and_no_other_trees_result(
    bench: Bench,
) -> None:
    """Issue 44: the check's line names the commit that was checked, and Publish never puts
    the result of another tree (an older commit, the uncommitted work) in the pull request:
    for a tip that was not checked it says so."""
    older = await commit(bench, "vorenus", "def add(a, b):\n    return a + b\n", "fix add")
    tip = await commit(bench, "vorenus", "def add(a, b):\n    return a * b\n", "refactor")
    await publish(bench, "vorenus", check="✅ 1 passed", check_commit=older)
    body = bench.forge.pulls(REPO)[0]["body"]
    assert "✅" not in body and "1 passed" not in body
    assert f"Last check: none of {tip[:7]}" in body

    await publish(bench, "vorenus", check="✅ 1 passed")  # whose? unsaid
    body = bench.forge.pulls(REPO)[0]["body"]
    assert "✅" not in body and f"Last check: none of {tip[:7]}" in body

    await publish(bench, "vorenus", check="❌ 1 failed of 1", check_commit=tip)
    body = bench.forge.pulls(REPO)[0]["body"]
    assert f"Last check, of {tip[:7]}: ❌ 1 failed of 1" in body
