"""Work cards in Telegram (real python-telegram-bot on the fake Bot API, agents on the fake
CLI, real git): after a turn that changed the agent's work on a project, one silent card
with its buttons; none after a turn that changed nothing; Diff sends what *that* turn
changed (an older card says the branch moved on); Drop asks first; a stranger's tap does
nothing."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from PIL import Image

from tests.botbench import Running, running_bot
from tests.conftest import FakeCli
from tests.fakes.bot_api import Call
from tests.gitrepo import git, make_project


def bash(command: str) -> str:
    return "TOOL Bash " + json.dumps({"command": command})


def is_card(text: str) -> bool:
    return text.startswith("🗂 vorenus #app")


def buttons(call: Call) -> dict[str, str]:
    markup: dict[str, Any] = call.params.get("reply_markup") or {}
    return {b["text"]: b["callback_data"] for row in markup["inline_keyboard"] for b in row}


def photo_name(bot: Running) -> str:
    return [u.filename for u in bot.api.uploads if u.method == "sendPhoto"][-1]


def position(bot: Running, call: Call) -> int:
    return next(i for i, c in enumerate(bot.api.calls) if c is call)


async def settled(bot: Running, card: Call, mark: str) -> Call:
    """The card once its check ended with ``mark``: as sent, or as edited when it ended
    (a quick check may end before the card is sent; else the card says ``⏳ running``)."""
    if mark in str(card.params["text"]):
        return card
    assert re.search(r"⏳ running on [0-9a-f]{7}$", str(card.params["text"]))
    assert "🛠 Fix" not in buttons(card)
    card_id = int(card.result["message_id"])
    return await bot.api.wait_for_call(
        "editMessageText",
        lambda c: int(c.params["message_id"]) == card_id and mark in str(c.params["text"]),
        start=position(bot, card),
    )


async def card_after(bot: Running, request: str) -> Call:
    start = await bot.ask(request)
    answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus #app"))
    return await bot.answer(position(bot, answer), is_card)


async def test_a_card_after_a_turn_that_changed_the_branch(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "app")
    extra = f'[projects.app]\npath = "{project}"\n'
    fix = "printf 'def add(a, b):\\n    return a + b\\n' > app.py && git commit -qam 'fix add'"
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        card = await card_after(bot, f"@vorenus #app fix the failing test\n{bash(fix)}")
        text = str(card.params["text"])
        assert text.splitlines()[0] == "🗂 vorenus #app · legio/vorenus/main"
        assert "1 new commit · 1 file +1 −1" in text
        assert card.params["disable_notification"] in (True, "true")
        keys = buttons(card)
        # no check configured: no Checks button
        assert set(keys) == {"🔍 Diff", "🗑 Drop", "↩️ Undo", "🔀 Try again"}
        first_id = int(card.result["message_id"])

        # a stranger's tap: refused at the gate, nothing sent
        start = len(bot.api.calls)
        bot.api.add_callback(keys["🔍 Diff"], first_id, user_id=4242)
        refused = await bot.api.wait_for_call("answerCallbackQuery", start=start)
        assert refused.params["text"] == "Not yours."
        assert not bot.api.calls_of("sendDocument")

        # a card's number in other digits (¹ is a digit to str.isdigit): no card, no crash
        start = len(bot.api.calls)
        bot.api.add_callback("card:diff:¹", first_id)
        gone = await bot.api.wait_for_call("answerCallbackQuery", start=start)
        assert gone.params["text"] == "This card is gone."

        # Diff: this turn's commits, as a .diff
        start = len(bot.api.calls)
        bot.api.add_callback(keys["🔍 Diff"], first_id)
        said = await bot.answer(start, lambda t: t.startswith("🔍 vorenus #app"))
        assert "this turn's commits · 1 file +1 −1" in said.params["text"]
        photo = await bot.api.wait_for_call("sendPhoto", start=start)
        assert str(photo.params["caption"]).startswith("app.py · +1 −1")
        await bot.api.wait_for_call(
            "sendDocument", lambda c: "card1.html" in str(c.params), start=start
        )
        uploads = {u.filename: u for u in bot.api.uploads}
        picture = Image.open(io.BytesIO(uploads[photo_name(bot)].content))
        assert picture.format == "PNG" and 800 <= picture.width <= 1280
        assert b"+    return a + b" in uploads["vorenus-app-card1.diff"].content
        assert b"-    return a - b" in uploads["vorenus-app-card1.diff"].content
        page = uploads["vorenus-app-card1.html"].content
        assert b"<script" not in page.lower() and b">add<" in page

        # a turn that changes nothing: no card
        start = await bot.ask("@vorenus #app what do you think")
        echo = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus #app"))
        # a turn that commits again and leaves a file uncommitted: a new card
        more = (
            "echo 'x = 1' > more.py && echo 'assert True' > test_more.py && git add . "
            "&& git commit -qm more; echo n > new.txt"
        )
        second = await card_after(bot, f"@vorenus #app more\n{bash(more)}")
        between = bot.api.calls[position(bot, echo) : position(bot, second)]
        assert not [c for c in between if is_card(str(c.params.get("text", "")))]
        assert "1 new commit · 2 files +2 −0 · 1 not committed" in str(second.params["text"])

        # the first card's Diff still shows its own turn, and says the branch moved on
        start = len(bot.api.calls)
        bot.api.add_callback(keys["🔍 Diff"], first_id)
        note = await bot.answer(start, lambda t: "has moved on since this card" in t)
        assert note.params["text"].startswith("legio/vorenus/main has moved on")
        await bot.api.wait_for_call("sendDocument", start=start)
        assert b"more.py" not in bot.api.uploads[-1].content

        # the second card's Diff: its commit, and the new file named as not committed
        start = len(bot.api.calls)
        bot.api.add_callback(buttons(second)["🔍 Diff"], int(second.result["message_id"]))
        said = await bot.answer(start, lambda t: t.startswith("New files, not committed"))
        assert "new.txt" in said.params["text"]
        album = await bot.api.wait_for_call("sendMediaGroup", start=start)  # two files: an album
        captions = [u.caption for u in bot.api.uploads if u.method == "sendMediaGroup"]
        assert captions == ["more.py · +1 −0", "test_more.py · +1 −0"]  # source before tests
        assert album.status == 200

        # Drop: asked once more, then the copy goes (its branch stays in the project)
        second_id = int(second.result["message_id"])
        start = len(bot.api.calls)
        bot.api.add_callback(buttons(second)["🗑 Drop"], second_id)
        asked = await bot.api.wait_for_call("editMessageReplyMarkup", start=start)
        confirm = {
            b["text"]: b["callback_data"]
            for row in asked.params["reply_markup"]["inline_keyboard"]
            for b in row
        }
        assert set(confirm) == {"🗑 Yes, drop the copy", "Keep it"}
        copy = castra_dir / "centuriones" / "vorenus" / "projects" / "app"
        assert copy.exists()
        start = len(bot.api.calls)
        bot.api.add_callback(confirm["🗑 Yes, drop the copy"], second_id)
        edited = await bot.api.wait_for_call("editMessageText", start=start)
        assert "Dropped vorenus's copy of #app" in edited.params["text"]
        assert "1 uncommitted change(s) went with it" in edited.params["text"]
        assert not copy.exists()

        # an old card after the copy went: said, and its own turn still shown
        start = len(bot.api.calls)
        bot.api.add_callback(keys["🔍 Diff"], first_id)
        gone = await bot.answer(start, lambda t: "was dropped since this card" in t)
        assert "its branch legio/vorenus/main is still in the project" in gone.params["text"]
        await bot.api.wait_for_call("sendDocument", start=start)
    assert "more" in git(project, "log", "--format=%s", "legio/vorenus/main")


async def test_a_card_shows_its_check_and_fix_asks_the_agent(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    """The project's check runs in the agent's sandbox after its turn; the card edits
    itself when it ends; Checks sends its output and log; Fix is a request to the agent
    in its lane holding the failure; a fixing turn's card turns green."""
    project = make_project(tmp_path / "app")  # its test fails: add() subtracts
    extra = f'[projects.app]\npath = "{project}"\ncheck = "python3 test_app.py"\n'
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        note = "echo '# notes' > NOTES.md && git add NOTES.md && git commit -qm notes"
        card = await card_after(bot, f"@vorenus #app write notes\n{bash(note)}")
        assert "🧪 Checks" in buttons(card)
        card_id = int(card.result["message_id"])
        failed = await settled(bot, card, "❌")
        assert "❌ failed (exit code 1)" in failed.params["text"]
        tip = git(project, "rev-parse", "legio/vorenus/main").strip()
        assert str(failed.params["text"]).endswith(f" on {tip[:7]}")  # the commit checked
        keys = {
            b["text"]: b["callback_data"]
            for row in failed.params["reply_markup"]["inline_keyboard"]
            for b in row
        }
        assert {"🔍 Diff", "🧪 Checks", "🛠 Fix", "🗑 Drop", "↩️ Undo", "🔀 Try again"} == set(keys)

        start = len(bot.api.calls)
        bot.api.add_callback(keys["🧪 Checks"], card_id)
        report = await bot.answer(start, lambda t: "AssertionError" in t)
        assert "python3 test_app.py" in report.params["text"]
        await bot.api.wait_for_call("sendDocument", start=start)
        assert b"AssertionError" in bot.api.uploads[-1].content

        start = len(bot.api.calls)
        bot.api.add_callback(keys["🛠 Fix"], card_id)
        asked = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus #app"))
        echoed = str(asked.params["text"])  # the fake CLI echoes what it was asked
        assert "(python3 test_app.py) failed (exit code 1) on your branch" in echoed
        assert "AssertionError" in echoed
        history = await bot.answer(await bot.ask("/history 3"), lambda t: "check of #app" in t)
        assert "caesar" in history.params["text"]

        fix = "sed -i 's/a - b/a + b/' app.py && git commit -qam 'fix add'"
        card = await card_after(bot, f"@vorenus #app fix it\n{bash(fix)}")
        passed = await settled(bot, card, "✅")
        assert "🛠 Fix" not in str(passed.params["reply_markup"])


async def test_a_centurio_dispatched_by_the_legatus_gets_its_card_too(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    """The Legatus asks vorenus to work on #app: nobody's request shows vorenus's answer
    to Caesar, but its work card still reaches him (silent, with its buttons)."""
    project = make_project(tmp_path / "app")
    extra = f'[projects.app]\npath = "{project}"\n'
    work = "echo 'x = 1' > x.py && git add x.py && git commit -qm x"
    order = {"centuriones": ["vorenus"], "text": bash(work), "project": "app"}
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        start = await bot.ask(f"CALL_TOOL legatus_tools dispatch {json.dumps(order)}")
        card = await bot.answer(start, is_card)
        assert "1 new commit · 1 file +1 −0" in str(card.params["text"])
        assert card.params["disable_notification"] in (True, "true")
        assert "🔍 Diff" in buttons(card)
