"""The forge through real python-telegram-bot on the fake Bot API: /publish and 🚀 Publish
show exactly what would be posted and post it on the confirming tap alone, CI red comes
back as one ❌ line in the agent's lane with 🛠 Fix, and the tap sends the agent a request
carrying the failing job's log tail as the forge's words."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.botbench import Running, running_bot
from tests.conftest import FakeCli
from tests.fakes.fake_forge import FakeForge
from tests.gitrepo import git, make_project
from tests.legion import processes_of

TOKEN = "ghp_bot_canary_77"
REPO = "caesar/app"


@pytest.fixture
async def forge() -> AsyncIterator[FakeForge]:
    async with FakeForge(TOKEN) as server:
        yield server


@pytest.fixture
async def bot(
    castra_dir: Path,
    fake_cli: FakeCli,
    tmp_path: Path,
    forge: FakeForge,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Running]:
    project = make_project(tmp_path / "app")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(project, "remote", "set-url", "origin", str(remote))
    git(project, "push", "--quiet", "origin", "main")
    forge.add_repo(REPO, bare=remote)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    extra = (
        f'[forge]\napi_url = "{forge.api_url}"\npoll_seconds = 0.05\nmax_poll_seconds = 0.2\n'
        "follow_reviews = true\n"
        f'[projects.app]\npath = "{project}"\nrepo = "{REPO}"\n'
    )
    async with running_bot(castra_dir, fake_cli, extra) as running:
        yield running


def bash(command: str) -> str:
    return f"TOOL Bash {json.dumps({'command': command})}"


def card_buttons(call: Any) -> dict[str, str]:
    markup = call.params.get("reply_markup") or {}
    if isinstance(markup, str):  # a multipart upload's
        markup = json.loads(markup)
    return {b["text"]: b["callback_data"] for row in markup["inline_keyboard"] for b in row}


def is_preview(text: str) -> bool:
    return text.startswith("🚀 The pull request of vorenus on #app")


def pre_texts(call: Any) -> list[str]:
    """The ``pre`` entities' text of a message (offsets in UTF-16 units, as Telegram's)."""
    data = str(call.params["text"]).encode("utf-16-le")
    return [
        data[2 * e["offset"] : 2 * (e["offset"] + e["length"])].decode("utf-16-le")
        for e in call.params.get("entities") or []
        if e["type"] == "pre"
    ]


async def post(bot: Running, start: int) -> int:
    """Tap 🚀 Post under the preview sent after ``start``; where to look for what follows."""
    preview = await bot.answer(start, is_preview)
    start = len(bot.api.calls)
    bot.api.add_callback(
        card_buttons(preview)["🚀 Post this pull request"], int(preview.result["message_id"])
    )
    return start


async def test_publish_then_red_ci_then_fix(
    bot: Running, forge: FakeForge, fake_cli: FakeCli
) -> None:
    start = await bot.ask(
        "@vorenus #app fix add\n"
        + bash("printf 'def add(a, b):\\n    return a + b\\n' > app.py && git commit -qam fix")
    )
    await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
    start = await post(bot, await bot.ask("/publish vorenus #app"))
    done = await bot.answer(start, lambda t: "pull request" in t)
    assert done.params["text"].startswith("🚀 Opened pull request #1 of vorenus on #app")
    [pull] = forge.pulls(REPO)

    forge.add_check_run(REPO, pull["head"]["sha"], "tests", conclusion="failure", log="E  0 != 4")
    line = await bot.answer(0, lambda t: t.startswith("❌ CI failed"))
    assert "tests" in line.params["text"]
    [[button]] = line.params["reply_markup"]["inline_keyboard"]
    assert button["text"] == "🛠 Fix"

    before = len(processes_of(fake_cli, "vorenus"))
    start = len(bot.api.calls)
    message_id = int(line.result["message_id"])
    bot.api.add_callback(button["callback_data"], message_id)
    await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
    process = processes_of(fake_cli, "vorenus")[-1]
    prompt = process.raw_prompts[-1]
    assert "The CI of your pull request #1" in prompt
    assert "E  0 != 4" in prompt and "untrusted" in prompt
    assert len(processes_of(fake_cli, "vorenus")) >= before
    assert sum(t.startswith("❌ CI failed") for t in bot.answers()) == 1


async def test_changes_requested_go_to_the_agent_with_follow_reviews(
    bot: Running, forge: FakeForge, fake_cli: FakeCli
) -> None:
    start = await bot.ask(
        "@vorenus #app fix add\n"
        + bash("printf 'def add(a, b):\\n    return a + b\\n' > app.py && git commit -qam fix")
    )
    await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
    start = await post(bot, await bot.ask("/publish vorenus #app"))
    await bot.answer(start, lambda t: "pull request #1" in t)
    start = len(bot.api.calls)
    forge.add_review(REPO, 1, "CHANGES_REQUESTED", "Name it plus()", ["and add a docstring"])
    line = await bot.answer(start, lambda t: t.startswith("💬 reviewer asked for changes"))
    assert not line.params.get("reply_markup")  # no tap needed: it went at once
    await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
    prompt = processes_of(fake_cli, "vorenus")[-1].raw_prompts[-1]
    assert "asked for changes on your pull request #1" in prompt
    assert "Name it plus()" in prompt and "app.py:2: and add a docstring" in prompt


async def test_publish_from_the_work_card_and_force_only_after_a_second_tap(
    bot: Running, forge: FakeForge, tmp_path: Path
) -> None:
    start = await bot.ask(
        "@vorenus #app fix add\n"
        + bash("printf 'def add(a, b):\\n    return a + b\\n' > app.py && git commit -qam fix")
    )
    answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus #app"))
    words = str(answer.params["text"]).split("\n", 2)[2]  # after the header and its rule
    card = await bot.answer(start, lambda t: t.startswith("🗂 vorenus #app"))
    keys = card_buttons(card)
    assert "🚀 Publish" in keys
    start = len(bot.api.calls)
    bot.api.add_callback(keys["🚀 Publish"], int(card.result["message_id"]))
    start = await post(bot, start)
    done = await bot.answer(start, lambda t: "pull request" in t)
    assert done.params["text"].startswith("🚀 Opened pull request #1 of vorenus on #app")
    [pull] = forge.pulls(REPO)
    assert pull["title"] == words.splitlines()[0]  # the agent's own words about its turn

    # someone else pushed to the forge's legio/vorenus/main: Publish asks before replacing it
    other = tmp_path / "other"
    git(
        tmp_path,
        "clone",
        "-q",
        "-b",
        "legio/vorenus/main",
        str(tmp_path / "remote.git"),
        str(other),
    )
    (other / "theirs.txt").write_text("theirs\n")
    git(other, "add", ".")
    git(other, "commit", "-qm", "theirs")
    git(other, "push", "-q", "origin", "legio/vorenus/main")
    start = await bot.ask(
        "@vorenus #app more\n" + bash("echo y > y.py && git add y.py && git commit -qm y")
    )
    card = await bot.answer(start, lambda t: t.startswith("🗂 vorenus #app"))
    start = len(bot.api.calls)
    bot.api.add_callback(card_buttons(card)["🚀 Publish"], int(card.result["message_id"]))
    start = await post(bot, start)
    asked = await bot.answer(start, lambda t: t.startswith("The forge refused the push"))
    assert "Replace it with vorenus's" in asked.params["text"]
    assert "theirs" in git(tmp_path / "remote.git", "log", "--format=%s", "legio/vorenus/main")
    replace = card_buttons(asked)
    assert set(replace) == {"⚠️ Replace the forge's legio/vorenus/main", "✖ Cancel"}
    start = len(bot.api.calls)
    bot.api.add_callback(
        replace["⚠️ Replace the forge's legio/vorenus/main"], int(asked.result["message_id"])
    )
    done = await bot.answer(start, lambda t: "pull request" in t)
    assert done.params["text"].startswith("🚀 Updated pull request #1 of vorenus on #app")
    log = git(tmp_path / "remote.git", "log", "--format=%s", "legio/vorenus/main")
    assert log.splitlines()[0] == "y" and "theirs" not in log
    assert len(forge.pulls(REPO)) == 1


async def test_an_old_cards_publish_pushes_what_that_card_showed(
    bot: Running, forge: FakeForge, tmp_path: Path
) -> None:
    start = await bot.ask(
        "@vorenus #app a\n" + bash("echo a > a.py && git add a.py && git commit -qm reviewed-A")
    )
    first = await bot.answer(start, lambda t: t.startswith("🗂 vorenus #app"))
    start = await bot.ask(
        "@vorenus #app b\n" + bash("echo b > b.py && git add b.py && git commit -qm UNSEEN-B")
    )
    await bot.answer(start, lambda t: t.startswith("🗂 vorenus #app"))
    start = len(bot.api.calls)
    bot.api.add_callback(card_buttons(first)["🚀 Publish"], int(first.result["message_id"]))
    start = await post(bot, start)
    done = await bot.answer(start, lambda t: "pull request" in t)
    assert done.params["text"].startswith("🚀 Opened pull request #1")
    log = git(tmp_path / "remote.git", "log", "--format=%s", "legio/vorenus/main")
    assert log.splitlines()[0] == "reviewed-A" and "UNSEEN-B" not in log


async def test_issues_during_a_long_rate_limit_answer_until_when_and_never_freeze_the_bot(
    bot: Running, forge: FakeForge
) -> None:
    forge.add_issue(REPO, "one")
    forge.exhaust(reset_in=600)
    start = await bot.ask("/issues #app")
    answer = await bot.answer(start, lambda t: "Cannot list the issues of #app" in t, wait_s=20)
    assert re.search(r"the forge's rate limit: until \d\d:\d\d", answer.params["text"])
    start = await bot.ask("/help")  # the bot answers the rest meanwhile
    await bot.answer(start, lambda t: "/publish" in t, wait_s=20)


async def test_a_commit_hidden_by_skip_worktree_is_checked_and_published_as_failing(
    castra_dir: Path,
    fake_cli: FakeCli,
    tmp_path: Path,
    forge: FakeForge,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 44, item 2, through the daemon: the agent commits code that fails Caesar's
    check, marks the file ``skip-worktree`` and puts the passing content back. The card's
    check ran on that commit (❌, naming it), and Publish posts that result for it."""
    from tests.test_cards_bot import card_after, settled

    project = make_project(tmp_path / "app")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(project, "remote", "set-url", "origin", str(remote))
    git(project, "push", "--quiet", "origin", "main")
    forge.add_repo(REPO, bare=remote)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    extra = (
        f'[forge]\napi_url = "{forge.api_url}"\n'
        f'[projects.app]\npath = "{project}"\nrepo = "{REPO}"\ncheck = "python3 test_app.py"\n'
    )
    attack = (
        "printf 'def add(a, b):\\n    return a * b + 1\\n' > app.py && git commit -qam refactor"
        " && git update-index --skip-worktree app.py"
        " && printf 'def add(a, b):\\n    return a + b\\n' > app.py"
    )
    async with running_bot(castra_dir, fake_cli, extra) as running:
        card = await card_after(running, f"@vorenus #app refactor add\n{bash(attack)}")
        tip = git(project, "rev-parse", "legio/vorenus/main").strip()
        failed = await settled(running, card, "❌")
        assert str(failed.params["text"]).endswith(f" on {tip[:7]}")
        start = len(running.api.calls)
        running.api.add_callback(card_buttons(failed)["🚀 Publish"], int(card.result["message_id"]))
        start = await post(running, start)  # what would be posted, then Post
        await running.answer(start, lambda t: "pull request" in t)
        [pull] = forge.pulls(REPO)
        assert f"Last check, of {tip[:7]}: ❌" in pull["body"] and "✅" not in pull["body"]
