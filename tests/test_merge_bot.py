"""✅ Merge and the undo of a published branch, on the fake forge (a bare repository as its
git side) through real python-telegram-bot on the fake Bot API: a green pull request's ✅
CI line carries ✅ Merge, one confirmation shows its title and method, the merge moves the
forge's base and the agent's clean copy onto it; red, pending, blocked and moved are
refused with the reason (in the chat and through the door); undoing a published branch
asks a second time, naming the pull request."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from legio.errors import ForgeError
from tests.botbench import Running, running_bot
from tests.conftest import FakeCli
from tests.fakes.fake_forge import FakeForge
from tests.gitrepo import git, make_project

TOKEN = "ghp_merge_canary_31"
REPO = "caesar/app"
BRANCH = "legio/vorenus/main"


@pytest.fixture
async def forge() -> AsyncIterator[FakeForge]:
    async with FakeForge(TOKEN) as server:
        yield server


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return tmp_path / "remote.git"


@pytest.fixture
async def bot(
    castra_dir: Path,
    fake_cli: FakeCli,
    tmp_path: Path,
    forge: FakeForge,
    remote: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> AsyncIterator[Running]:
    project = make_project(tmp_path / "app")
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(project, "remote", "set-url", "origin", str(remote))
    git(project, "push", "--quiet", "origin", "main")
    forge.add_repo(REPO, bare=remote)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    method = getattr(request, "param", "")
    extra = (
        f'[forge]\napi_url = "{forge.api_url}"\npoll_seconds = 0.05\nmax_poll_seconds = 0.2\n'
        f'[projects.app]\npath = "{project}"\nrepo = "{REPO}"\n'
        + (f'merge = "{method}"\n' if method else "")
    )
    async with running_bot(castra_dir, fake_cli, extra) as running:
        yield running


def bash(command: str) -> str:
    return f"TOOL Bash {json.dumps({'command': command})}"


def keys(call: Any) -> dict[str, str]:
    markup = call.params.get("reply_markup") or {}
    return {b["text"]: b["callback_data"] for row in markup["inline_keyboard"] for b in row}


async def tap(bot: Running, call: Any, label: str, said: Any) -> Any:
    start = len(bot.api.calls)
    bot.api.add_callback(keys(call)[label], int(call.result["message_id"]))
    return await bot.answer(start, said)


async def published(bot: Running, forge: FakeForge) -> tuple[Any, dict[str, Any]]:
    """A turn that commits (its card), published as pull request #1."""
    start = await bot.ask(
        "@vorenus #app fix add\n"
        + bash("printf 'def add(a, b):\\n    return a + b\\n' > app.py && git commit -qam fix")
    )
    answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
    card = await bot.answer(
        next(i for i, c in enumerate(bot.api.calls) if c is answer),
        lambda t: t.startswith("🗂 vorenus #app"),
    )
    start = await bot.ask("/publish vorenus #app")
    preview = await bot.answer(start, lambda t: t.startswith("🚀 The pull request of vorenus"))
    await tap(bot, preview, "🚀 Post this pull request", lambda t: "pull request #1" in t)
    [pull] = forge.pulls(REPO)
    return card, pull


def copy_of(bot: Running) -> Path:
    return bot.app.engine.sessions.projects.copy_dir("vorenus", "app")


async def test_a_green_pull_request_merges_after_one_confirmation(
    bot: Running, forge: FakeForge, remote: Path
) -> None:
    _, pull = await published(bot, forge)
    head = pull["head"]["sha"]
    forge.add_check_run(REPO, head, "tests", conclusion="success")
    line = await bot.answer(0, lambda t: t.startswith("✅ CI passed"))
    assert list(keys(line)) == ["✅ Merge"]
    asked = await tap(bot, line, "✅ Merge", lambda t: t.startswith("✅ Merge pull request #1"))
    text = str(asked.params["text"])
    assert "into main by merge?" in text and f"head {head[:7]}" in text
    assert "“fix”" in text  # its title
    assert not forge.calls_to("PUT", "/merge")  # nothing merged before the confirming tap

    start = len(bot.api.calls)
    bot.api.add_callback(keys(asked)["✅ Merge"], int(asked.result["message_id"]))
    done = await bot.api.wait_for_call(
        "editMessageText",
        lambda c: "✅ Merged pull request #1" in str(c.params["text"]),
        start=start,
    )
    [call] = forge.calls_to("PUT", "/pulls/1/merge")
    assert call.body == {"sha": head, "merge_method": "merge"}
    new_base = git(remote, "rev-parse", "main").strip()
    assert git(remote, "rev-parse", f"{new_base}^2").strip() == head  # a merge commit
    said = str(done.params["text"])
    assert f"now starts from the new main ({new_base[:7]})" in said
    assert git(copy_of(bot), "rev-parse", "HEAD").strip() == new_base
    record = await bot.app.engine.forge.pulls.numbered("app", 1)
    assert record is not None and record.state == "merged"
    # asked again: the pull request is merged, nothing is sent to the forge
    plan = await bot.app.work.merge_plan("app", 1)
    assert plan.refusal == "#1 is merged."


@pytest.mark.parametrize("bot", ["squash"], indirect=True)
async def test_red_pending_blocked_and_moved_are_refused(
    bot: Running, forge: FakeForge, remote: Path
) -> None:
    card, pull = await published(bot, forge)
    head = pull["head"]["sha"]
    work = bot.app.work

    run = forge.add_check_run(REPO, head, "tests", status="in_progress")
    plan = await work.merge_plan("app", 1)
    assert plan.refusal.startswith(f"CI has not passed on {head[:7]} yet")
    run.update(status="completed", conclusion="success")
    line = await bot.answer(0, lambda t: t.startswith("✅ CI passed"))

    forge.repos[REPO].blocked.add(1)  # a required review missing: said in the chat
    said = await tap(bot, line, "✅ Merge", lambda t: t.startswith("Not merged"))
    assert "a required review" in str(said.params["text"])
    forge.repos[REPO].blocked.clear()

    # the branch moves on the forge after Caesar was asked: his tap is refused
    asked = await tap(bot, line, "✅ Merge", lambda t: t.startswith("✅ Merge pull request #1"))
    assert "by squash?" in str(asked.params["text"])  # the project's method
    moved = git(remote, "rev-parse", "main").strip()
    git(remote, "update-ref", f"refs/heads/{BRANCH}", moved)
    start = len(bot.api.calls)
    bot.api.add_callback(keys(asked)["✅ Merge"], int(asked.result["message_id"]))
    refused = await bot.api.wait_for_call(
        "editMessageText", lambda c: "Not merged" in str(c.params["text"]), start=start
    )
    assert "CI has not passed" in str(refused.params["text"])  # the new head has no CI yet
    assert not forge.calls_to("PUT", "/merge")

    # red on the new head: the line offers 🛠 Fix, never Merge; the door refuses
    red = forge.add_check_run(REPO, moved, "tests", conclusion="failure")
    line = await bot.answer(0, lambda t: t.startswith("❌ CI failed"))
    assert "✅ Merge" not in keys(line)
    assert (await work.merge_plan("app", 1)).refusal == f"CI failed on {moved[:7]} (tests)."
    with pytest.raises(ForgeError, match="CI failed"):
        await work.merge("app", 1, moved[:12])

    # green on the new head, but Caesar confirmed the old one: refused
    red.update(conclusion="success")
    assert (await work.merge_plan("app", 1)).refusal == ""
    with pytest.raises(ForgeError, match="moved since you were asked"):
        await work.merge("app", 1, head[:12])
    # the forge itself refuses a head other than the one sent (409)
    with pytest.raises(ForgeError) as caught:
        await bot.app.engine.forge.required().merge_pull(REPO, 1, sha=head, method="squash")
    assert caught.value.status == 409
    # a method the repository does not allow: said, naming the setting
    forge.repos[REPO].merge_methods = ("merge",)
    assert "merge = 'squash'" in (await work.merge_plan("app", 1)).refusal
    assert git(remote, "rev-parse", "main").strip() == moved  # nothing was merged
    del card


async def test_undo_of_a_published_branch_asks_again_naming_the_pull_request(
    bot: Running, forge: FakeForge, remote: Path
) -> None:
    card, pull = await published(bot, forge)
    project = bot.config.projects["app"].path
    turn_end = git(project, "rev-parse", BRANCH).strip()
    asked = await tap(bot, card, "↩️ Undo", lambda t: t.startswith(f"↩️ {BRANCH} is on the forge"))
    assert "pull request #1" in str(asked.params["text"]) and pull["html_url"] in str(
        asked.params["text"]
    )
    assert git(project, "rev-parse", BRANCH).strip() == turn_end  # nothing moved yet
    start = len(bot.api.calls)
    bot.api.add_callback(keys(asked)["Keep it"], int(asked.result["message_id"]))
    answered = await bot.api.wait_for_call("answerCallbackQuery", start=start)
    assert answered.params["text"] == "Kept: not undone."
    assert git(project, "rev-parse", BRANCH).strip() == turn_end
    done = await tap(bot, asked, "↩️ Yes, undo it", lambda t: t.startswith("↩️ Undone"))
    assert "still shows them until the next 🚀 Publish" in str(done.params["text"])
    assert git(project, "rev-parse", BRANCH).strip() == git(project, "rev-parse", "main").strip()
    assert git(remote, "rev-parse", BRANCH).strip() == turn_end  # nothing pushed


async def test_a_forge_naming_another_head_or_base_is_refused_and_caesars_main_kept(
    bot: Running, forge: FakeForge, remote: Path
) -> None:
    """The forge says the pull request's head is ``main`` (the agent's copy is on a branch
    of that name too): Legio refuses, and Caesar's unpushed commit on his main stays."""
    _, pull = await published(bot, forge)
    head = pull["head"]["sha"]
    project = bot.config.projects["app"].path
    (project / "mine.txt").write_text("caesar's\n")
    git(project, "add", "mine.txt")
    git(project, "commit", "-qm", "caesar's own, not pushed")
    caesar_main = git(project, "rev-parse", "main").strip()
    start = await bot.ask("@vorenus #app hm\n" + bash("git checkout -q -B main"))
    await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
    forge.repos[REPO].reported[1] = {"head": {"ref": "main"}}
    forge.add_check_run(REPO, head, "tests", conclusion="success")
    line = await bot.answer(0, lambda t: t.startswith("✅ CI passed"))
    said = await tap(bot, line, "✅ Merge", lambda t: t.startswith("Not merged"))
    assert "the forge says its head is “caesar/app:main”, not caesar/app:legio/vorenus/main" in (
        str(said.params["text"])
    )
    work = bot.app.work
    with pytest.raises(ForgeError, match="its head is"):
        await work.merge("app", 1, head)
    # another repository's branch of the same name, or another base: refused too
    forge.repos[REPO].reported[1] = {"head": {"repo": {"full_name": "mallory/app"}}}
    assert "“mallory/app:legio/vorenus/main”" in (await work.merge_plan("app", 1)).refusal
    forge.repos[REPO].reported[1] = {"head": {"repo": None}}  # the head repository deleted
    assert "a deleted repository" in (await work.merge_plan("app", 1)).refusal
    forge.repos[REPO].reported[1] = {"base": {"ref": "release"}}
    assert "its base is “release”, not main" in (await work.merge_plan("app", 1)).refusal
    assert not forge.calls_to("PUT", "/merge")
    assert git(project, "rev-parse", "main").strip() == caesar_main
    # and the copy's mover never writes a branch that is not the agent's, whatever it is given
    forge.repos[REPO].reported.clear()
    plan = await work.merge_plan("app", 1)
    assert plan.refusal == "" and plan.branch == BRANCH
    copy_head = git(copy_of(bot), "rev-parse", "HEAD").strip()
    bad = dataclasses.replace(plan, branch="main", sha=copy_head)
    await bot.app.engine.forge.merger.move_copy(bad)
    assert git(project, "rev-parse", "main").strip() == caesar_main


async def test_the_confirmation_pins_the_full_head_and_flags_a_changed_ci(
    bot: Running, forge: FakeForge, remote: Path
) -> None:
    """The confirming button carries a key, not the commit: the full head shown is the one
    merged; a branch that edits its own workflow says so; the forge's words are visible."""
    start = await bot.ask(
        "@vorenus #app green it\n"
        + bash(
            "mkdir -p .github/workflows && echo 'run: true' > .github/workflows/ci.yml "
            "&& echo x >> app.py && git add -A && git commit -qm 'green it'"
        )
    )
    await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
    start = await bot.ask("/publish vorenus #app")
    preview = await bot.answer(start, lambda t: t.startswith("🚀 The pull request of vorenus"))
    await tap(bot, preview, "🚀 Post this pull request", lambda t: "pull request #1" in t)
    [pull] = forge.pulls(REPO)
    head = pull["head"]["sha"]
    forge.add_check_run(REPO, head, "tests", conclusion="success")
    line = await bot.answer(0, lambda t: t.startswith("✅ CI passed"))
    asked = await tap(bot, line, "✅ Merge", lambda t: t.startswith("✅ Merge pull request #1"))
    text = str(asked.params["text"])
    assert f"{BRANCH} into main by merge?" in text and f"head {head}:" in text
    assert "⚠️ this branch changes the CI that judged it: .github/workflows/ci.yml" in text
    data = keys(asked)["✅ Merge"]
    assert head[:7] not in data and len(data) < 20
    red = forge.add_check_run(REPO, head, "lint\u202e", conclusion="failure")
    assert (await bot.app.work.merge_plan("app", 1)).refusal == (
        f"CI failed on {head[:7]} (lint⟨U+202E⟩)."
    )
    red.update(conclusion="success")
    # a question Legio no longer holds merges nothing
    start = len(bot.api.calls)
    bot.api.add_callback("mg:yes:forgotten", int(asked.result["message_id"]))
    told = await bot.api.wait_for_call("answerCallbackQuery", start=start)
    assert "too old" in str(told.params["text"])
    # the door merges the full commit only: a prefix of it is refused
    with pytest.raises(ForgeError, match="moved since you were asked"):
        await bot.app.work.merge("app", 1, head[:12])
    start = len(bot.api.calls)
    bot.api.add_callback(data, int(asked.result["message_id"]))
    await bot.api.wait_for_call(
        "editMessageText", lambda c: "✅ Merged" in str(c.params["text"]), start=start
    )
    [call] = forge.calls_to("PUT", "/pulls/1/merge")
    assert call.body == {"sha": head, "merge_method": "merge"}
