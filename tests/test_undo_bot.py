"""↩️ Undo, /undo and 🔀 Try again (real python-telegram-bot on the fake Bot API, the agent on
the fake CLI, real git): Undo puts the branch and the copy back where the turn found them
and keeps the turn's work (commits and uncommitted files) under a ref of Legio's; /undo
lists it and brings it back, refusing when the branch moved since; what was kept over 14
days is pruned at start; Try again starts a new branch from the turn's start and asks the
same request again there."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from legio.projects import undoing
from tests.botbench import Running, running_bot
from tests.conftest import FakeCli
from tests.fakes.bot_api import Call
from tests.gitrepo import IDENTITY, git, make_project
from tests.legion import processes_of
from tests.test_stop import hold_at

BRANCH = "legio/vorenus/main"


def bash(command: str) -> str:
    return "TOOL Bash " + json.dumps({"command": command})


def buttons(call: Call) -> dict[str, str]:
    markup = call.params.get("reply_markup") or {}
    return {b["text"]: b["callback_data"] for row in markup["inline_keyboard"] for b in row}


def position(bot: Running, call: Call) -> int:
    return next(i for i, c in enumerate(bot.api.calls) if c is call)


async def card_after(bot: Running, request: str) -> Call:
    start = await bot.ask(request)
    answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus #app"))
    return await bot.answer(position(bot, answer), lambda t: t.startswith("🗂 vorenus #app"))


async def tap(bot: Running, card: Call, label: str, said: str) -> Call:
    start = len(bot.api.calls)
    bot.api.add_callback(buttons(card)[label], int(card.result["message_id"]))
    return await bot.answer(start, lambda t: t.startswith(said))


async def command(bot: Running, text: str) -> str:
    start = await bot.ask(text)
    return str((await bot.answer(start, lambda t: True)).params["text"])


def tip(project: Path, ref: str) -> str:
    return git(project, "rev-parse", "--verify", "--quiet", ref).strip()


def old_kept_ref(project: Path, days: float, card: int = 99) -> str:
    """A kept turn of ``days`` ago, as undo writes it (card 99); its ref."""
    head = tip(project, "main")
    note = (
        f"Legio undo: card {card} of vorenus on #app\n\nlegio-card: {card}\nlegio-agent: vorenus\n"
        f"legio-project: app\nlegio-branch: {BRANCH}\nlegio-from: {head}\nlegio-to: {head}\n"
        "legio-uncommitted: 0\n"
    )
    stamp = f"{int(time.time() - days * 86400)} +0000"
    env = {**os.environ, **IDENTITY, "GIT_COMMITTER_DATE": stamp, "GIT_AUTHOR_DATE": stamp}
    tree = tip(project, "main^{tree}")
    made = subprocess.run(
        ["git", "-C", str(project), "commit-tree", tree, "-p", head, "-m", note],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    commit = made.stdout.strip()
    git(project, "update-ref", f"refs/legio/undo/vorenus/{card}", commit)
    return f"refs/legio/undo/vorenus/{card}"


async def test_undo_keeps_the_turn_and_restore_brings_it_back(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "app")
    old_kept_ref(project, days=15)  # over 14 days: pruned at start
    base = tip(project, "main")
    extra = f'[projects.app]\npath = "{project}"\n'
    fix = (
        "printf 'def add(a, b):\\n    return a + b\\n' > app.py && git commit -qam 'fix add' "
        "&& echo draft > new.txt && echo '# more' >> README.md"
    )
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        assert not git(project, "for-each-ref", "refs/legio/undo/")  # pruned at start
        copy = bot.app.engine.sessions.projects.copy_dir("vorenus", "app")
        card = await card_after(bot, f"@vorenus #app fix add\n{bash(fix)}")
        assert "1 new commit" in str(card.params["text"])
        turn_end = tip(project, BRANCH)
        assert turn_end != base

        # Undo: the branch (project and copy) and the copy's files as before the turn
        said = await tap(bot, card, "↩️ Undo", "↩️ Undone")
        text = str(said.params["text"])
        assert f"back at {base[:7]}" in text and "/undo 1" in text
        assert "1 commit(s) and 2 uncommitted change(s)" in text
        assert tip(project, BRANCH) == base
        assert git(copy, "rev-parse", "HEAD").strip() == base
        assert not (copy / "new.txt").exists()
        assert "return a - b" in (copy / "app.py").read_text()
        assert "# more" not in (copy / "README.md").read_text()
        # kept under Legio's ref: the turn's commit, and the uncommitted files on top
        kept = tip(project, "refs/legio/undo/vorenus/1")
        assert git(project, "rev-parse", f"{kept}^").strip() == turn_end
        assert git(project, "show", f"{kept}:new.txt") == "draft\n"
        assert project.joinpath("notes.txt").exists()  # Caesar's checkout untouched

        # /undo lists it; /undo 1 brings it back (uncommitted work uncommitted again)
        listing = await command(bot, "/undo")
        assert "card 1 · vorenus #app" in listing and "2 uncommitted change(s)" in listing
        assert "card 99" not in listing
        back = await command(bot, "/undo 1")
        assert back.startswith("Restored card 1")
        assert tip(project, BRANCH) == turn_end
        assert git(copy, "rev-parse", "HEAD").strip() == turn_end
        assert (copy / "new.txt").read_text() == "draft\n"
        status = git(copy, "status", "--porcelain")
        assert "?? new.txt" in status and " M README.md" in status
        assert not git(project, "for-each-ref", "refs/legio/undo/")
        again = await command(bot, "/undo 1")
        assert again.startswith("Not restored: Nothing of card 1 is kept")

        # undone again, then a newer turn moves the branch: restoring is refused
        await tap(bot, card, "↩️ Undo", "↩️ Undone")
        commit_x = bash("echo x > x.py && git add x.py && git commit -qm x")
        newer = await card_after(bot, f"@vorenus #app more\n{commit_x}")
        refused = await command(bot, "/undo 1")
        assert refused.startswith("Not restored:") and "has moved since card 1" in refused
        assert tip(project, "refs/legio/undo/vorenus/1")  # still kept
        # an older card is not undone over a newer turn
        said = await tap(bot, card, "↩️ Undo", "Not undone")
        assert "Card 2 came after card 1" in str(said.params["text"])
        # undo the newer one: then the older one comes back
        await tap(bot, newer, "↩️ Undo", "↩️ Undone")
        assert (await command(bot, "/undo 1")).startswith("Restored card 1")
        assert tip(project, BRANCH) == turn_end

        # 14 days: kept refs older than that go
        await bot.ask("/undo")
        repo_refs = git(project, "for-each-ref", "--format=%(refname)", "refs/legio/undo/")
        assert repo_refs.split() == ["refs/legio/undo/vorenus/2"]
        assert await undoing.prune(project, now=time.time() + 13 * 86400) == 0
        assert await undoing.prune(project, now=time.time() + 15 * 86400) == 1
        assert (await command(bot, "/undo")).startswith("Nothing is kept")


async def test_try_again_forks_from_the_turns_start_and_asks_again(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "app")
    base = tip(project, "main")
    extra = f'[projects.app]\npath = "{project}"\n'
    first = "echo one > one.py && git add one.py && git commit -qm one && echo wip > wip.txt"
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        copy = bot.app.engine.sessions.projects.copy_dir("vorenus", "app")
        card = await card_after(bot, f"@vorenus #app add one\n{bash(first)}")
        turn_end = tip(project, BRANCH)
        before = len(processes_of(fake_cli, "vorenus"))
        question = await tap(bot, card, "🔀 Try again", "🔀 Try card 1's request again")
        said = await tap(bot, question, "🔀 Same model", "🔀 vorenus tries card 1's request again")
        text = str(said.params["text"])
        assert "legio/vorenus/try-2" in text and f"from {base[:7]}" in text
        assert "1 uncommitted change(s) kept" in text
        # the same request, asked again, answered on the new branch
        answer = await bot.answer(position(bot, said), lambda t: t.startswith("⚔️ vorenus #app"))
        second = await bot.answer(position(bot, answer), lambda t: t.startswith("🗂 vorenus #app"))
        assert "legio/vorenus/try-2" in str(second.params["text"])  # its own card
        prompt = processes_of(fake_cli, "vorenus")[-1].raw_prompts[-1]
        assert "add one" in prompt
        assert len(processes_of(fake_cli, "vorenus")) >= before
        assert git(copy, "symbolic-ref", "--short", "HEAD").strip() == "legio/vorenus/try-2"
        assert tip(project, BRANCH) == turn_end  # the first try stays as it was
        try_tip = tip(project, "legio/vorenus/try-2")
        assert git(project, "rev-parse", f"{try_tip}^").strip() == base
        assert git(project, "show", "refs/legio/undo/vorenus/1:wip.txt") == "wip\n"


async def test_undo_puts_back_the_uncommitted_work_the_turn_found(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "app")
    base = tip(project, "main")
    extra = f'[projects.app]\npath = "{project}"\n'
    first = "echo wip > wip.txt && echo '# note' >> README.md"
    second = "echo two > two.py && git add two.py && git commit -qm two && echo more >> wip.txt"
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        copy = bot.app.engine.sessions.projects.copy_dir("vorenus", "app")
        await card_after(bot, f"@vorenus #app start\n{bash(first)}")
        card = await card_after(bot, f"@vorenus #app go on\n{bash(second)}")
        turn_end = tip(project, BRANCH)

        said = await tap(bot, card, "↩️ Undo", "↩️ Undone")
        assert "held before that turn is back, uncommitted" in str(said.params["text"])
        assert tip(project, BRANCH) == base
        assert not (copy / "two.py").exists()
        assert (copy / "wip.txt").read_text() == "wip\n"  # as the turn found it
        status = git(copy, "status", "--porcelain")
        assert "?? wip.txt" in status and " M README.md" in status

        # the copy holds just what undo put back: /undo 2 brings the turn's end back
        back = await command(bot, "/undo 2")
        assert back.startswith("Restored card 2")
        assert tip(project, BRANCH) == turn_end
        assert (copy / "wip.txt").read_text() == "wip\nmore\n"
        assert (copy / "two.py").exists()
        assert "# note" in (copy / "README.md").read_text()


async def test_undo_waits_for_no_turn_it_is_refused_while_the_agent_works(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path / "app")
    extra = f'[projects.app]\npath = "{project}"\n'
    hold = hold_at(monkeypatch, tmp_path, "pause")  # its second turn waits for the test
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        card = await card_after(bot, f"@vorenus #app one\n{bash('echo 1 > one.py')}")
        start = await bot.ask("@vorenus #app think a while\nPAUSE")
        await hold.reached("pause")  # working in its copy, however slow the machine
        said = await tap(bot, card, "↩️ Undo", "Not undone")
        assert "working" in str(said.params["text"]) and "/stop vorenus" in str(said.params["text"])
        assert (bot.app.engine.sessions.projects.copy_dir("vorenus", "app") / "one.py").exists()
        assert not git(project, "for-each-ref", "refs/legio/undo/")
        hold.go("pause")
        await bot.answer(start, lambda t: t.startswith("⚔️ vorenus #app"))
        # once it answered: a turn that only left files uncommitted (its branch never
        # published) is undone too
        done = await tap(bot, card, "↩️ Undo", "↩️ Undone")
        assert "1 uncommitted change(s) are kept" in str(done.params["text"])
        copy = bot.app.engine.sessions.projects.copy_dir("vorenus", "app")
        assert not (copy / "one.py").exists()
        assert not git(project, "for-each-ref", "refs/heads/legio/")  # still unpublished
        assert (await command(bot, "/undo 1")).startswith("Restored card 1")
        assert (copy / "one.py").read_text() == "1\n"


async def test_try_again_after_undo_keeps_beside_what_undo_kept(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    """↩️ Undo of card 2, then 🔀 Try again of card 2: the undone commits stay under the
    undo's ref; the Try again's keep goes beside it, and /undo names both."""
    project = make_project(tmp_path / "app")
    extra = f'[projects.app]\npath = "{project}"\n'
    first = "echo wip > wip.txt && echo '# note' >> README.md"
    second = "echo two > two.py && git add two.py && git commit -qm two && echo more >> wip.txt"
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        await card_after(bot, f"@vorenus #app start\n{bash(first)}")
        card = await card_after(bot, f"@vorenus #app go on\n{bash(second)}")
        turn_end = tip(project, BRANCH)
        await tap(bot, card, "↩️ Undo", "↩️ Undone")
        undone = tip(project, "refs/legio/undo/vorenus/2")
        assert git(project, "rev-parse", f"{undone}^").strip() == turn_end
        question = await tap(bot, card, "🔀 Try again", "🔀 Try card 2's request again")
        said = await tap(bot, question, "🔀 Same model", "🔀 vorenus tries card 2's request again")
        assert "2 uncommitted change(s) kept" in str(said.params["text"])
        assert tip(project, "refs/legio/undo/vorenus/2") == undone  # not overwritten
        again = tip(project, "refs/legio/undo/vorenus/2-2")
        assert again and again != undone
        assert "two.py" not in git(project, "ls-tree", "--name-only", again)
        listing = await command(bot, "/undo")
        assert "card 2 (its keep 2: /undo 2-2) · vorenus #app" in listing
        assert f"card 2 · vorenus #app · {BRANCH} " in listing
        refused = await command(bot, "/undo 2-5")
        assert "Nothing of card 2 is kept as 2-5: its kept work is /undo 2-2, /undo 2" in refused
