"""Approvals and questions as Telegram buttons: real python-telegram-bot on the fake Bot API,
agents on the fake CLI (which asks ``can_use_tool`` after a hook's "ask", as the real one)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.botbench import CAESAR, Running, running_bot
from tests.conftest import FakeCli
from tests.fakes.bot_api import Call

STRANGER = 4242
APPROVALS = '[approvals]\nask = ["Bash(touch:*)"]'


def with_bash(castra_dir: Path, *names: str) -> None:
    for name in names:
        prompt = castra_dir / "centuriones" / name / "prompt.md"
        text = prompt.read_text(encoding="utf-8")
        prompt.write_text(text.replace("---\n", "---\ntools: [Bash]\n", 1), encoding="utf-8")


def touch(name: str, file: str) -> str:
    return f"@{name} TOOL Bash {json.dumps({'command': f'touch {file}'})}"


def has_buttons(call: Call) -> bool:
    return "⚔️" in str(call.params.get("text", "")) and bool(call.params.get("reply_markup"))


async def approval_message(bot: Running, start: int, agent: str = "vorenus") -> tuple[int, str]:
    """The approval request the bot sent after ``start``: its message id and nonce prefix."""
    call = await bot.api.wait_for_call(
        "sendMessage",
        lambda c: has_buttons(c) and f"⚔️ {agent} " in str(c.params["text"]),
        start=start,
    )
    message_id = int(call.result["message_id"])
    data = bot.api.buttons(CAESAR, message_id)[0][1]  # ap:<id>:<nonce>:o
    return message_id, data.rsplit(":", 1)[0]


async def tap(bot: Running, data: str, message_id: int, user_id: int = CAESAR) -> str:
    start = len(bot.api.calls)
    bot.api.add_callback(data, message_id, user_id=user_id)
    call = await bot.api.wait_for_call("answerCallbackQuery", start=start)
    return str(call.params.get("text", ""))


def workspace(castra_dir: Path, name: str) -> Path:
    return castra_dir / "centuriones" / name / "workspace"


async def test_buttons_strangers_forgeries_and_replays(castra_dir: Path, fake_cli: FakeCli) -> None:
    with_bash(castra_dir, "vorenus", "pullo")
    async with running_bot(castra_dir, fake_cli, APPROVALS) as bot:
        start = await bot.ask(touch("vorenus", "one.txt"))
        message_id, prefix = await approval_message(bot, start)
        text = bot.api.messages[(CAESAR, message_id)]["text"]
        assert "⚔️ vorenus asks to use Bash:\ntouch one.txt" in text
        labels = [label for label, _ in bot.api.buttons(CAESAR, message_id)]
        assert labels == ["Allow once", "Allow for this session", "Always", "Deny", "Deny and stop"]

        assert await tap(bot, f"{prefix}:o", message_id, user_id=STRANGER) == "Not yours."
        forged = prefix.rsplit(":", 1)[0] + ":deadbeef:o"
        assert await tap(bot, forged, message_id) == "Unknown button."
        assert await tap(bot, "ap:99999:abcd:o", message_id) == "Unknown button."
        assert await tap(bot, "ap:²:abcd:o", message_id) == "Unknown button."
        assert not (workspace(castra_dir, "vorenus") / "one.txt").exists()

        assert await tap(bot, f"{prefix}:o", message_id) == "✅ Allowed once"
        answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))
        assert "TOOL_RESULT" in str(answer.params["text"])
        assert (workspace(castra_dir, "vorenus") / "one.txt").exists()
        shown = bot.api.messages[(CAESAR, message_id)]
        assert shown["text"].endswith("✅ Allowed once") and "reply_markup" not in shown
        assert await tap(bot, f"{prefix}:d", message_id) == "Already decided."  # a replay

        # two agents waiting: two messages, answered independently; a reply gives a reason
        start = await bot.ask("@vorenus @pullo TOOL Bash " + json.dumps({"command": "touch two"}))
        vorenus_id, _ = await approval_message(bot, start, "vorenus")
        pullo_id, pullo = await approval_message(bot, start, "pullo")
        assert vorenus_id != pullo_id
        assert await tap(bot, f"{pullo}:s", pullo_id) == "✅ Allowed for this session"
        bot.api.add_message("not on the Ides", user_id=CAESAR)  # plain text: not a reason
        sent = bot.api.add_update(
            {
                "message": {
                    "message_id": 9000,
                    "date": 0,
                    "chat": {"id": CAESAR, "type": "private", "first_name": "Caesar"},
                    "from": {"id": CAESAR, "is_bot": False, "first_name": "Caesar"},
                    "text": "the forum is closed",
                    "reply_to_message": bot.api.messages[(CAESAR, vorenus_id)],
                }
            }
        )
        assert sent
        answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))
        assert "His reason: the forum is closed" in str(answer.params["text"])
        assert not (workspace(castra_dir, "vorenus") / "two").exists()
        assert (workspace(castra_dir, "pullo") / "two").exists()
        assert bot.api.messages[(CAESAR, vorenus_id)]["text"].endswith(
            "❌ Denied: the forum is closed"
        )


async def test_old_buttons_after_a_restart_say_expired(castra_dir: Path, fake_cli: FakeCli) -> None:
    async with running_bot(castra_dir, fake_cli, APPROVALS) as bot:
        gate = bot.app.engine.sessions.approvals
        assert gate is not None and gate.store is not None
        request_id = await gate.store.open_request("vorenus", "Bash", "git push")
        await gate.load()  # what the next start does with it
        reply = await tap(bot, f"ap:{request_id}:abcd:o", 12345)
        assert reply.startswith("Expired")


async def test_an_agents_question_as_buttons(castra_dir: Path, fake_cli: FakeCli) -> None:
    question = {
        "question": "Which road?",
        "header": "Road",
        "options": [
            {"label": "Appia", "description": "south"},
            {"label": "Latina", "description": "inland"},
        ],
        "multiSelect": False,
    }
    prompt = castra_dir / "centuriones" / "vorenus" / "prompt.md"
    prompt.write_text(prompt.read_text().replace("---\n", "---\ntools: [AskUserQuestion]\n", 1))
    async with running_bot(castra_dir, fake_cli) as bot:
        start = await bot.ask(
            f"@vorenus TOOL AskUserQuestion {json.dumps({'questions': [question]})}"
        )
        call = await bot.api.wait_for_call(
            "sendMessage", lambda c: "asks: Which road?" in str(c.params.get("text")), start=start
        )
        message_id = int(call.result["message_id"])
        buttons = bot.api.buttons(CAESAR, message_id)
        assert [label for label, _ in buttons] == ["Appia", "Latina"]
        assert await tap(bot, buttons[0][1], message_id) == ""
        answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))
        assert '"Which road?"="Appia"' in str(answer.params["text"])
        assert bot.api.messages[(CAESAR, message_id)]["text"].endswith("✅ Appia")

        several = {**question, "question": "Which roads?", "multiSelect": True}
        start = await bot.ask(
            f"@vorenus TOOL AskUserQuestion {json.dumps({'questions': [several]})}"
        )
        call = await bot.api.wait_for_call(
            "sendMessage", lambda c: "asks: Which roads?" in str(c.params.get("text")), start=start
        )
        message_id = int(call.result["message_id"])
        buttons = bot.api.buttons(CAESAR, message_id)
        assert [label for label, _ in buttons] == ["Appia", "Latina", "Done"]
        await tap(bot, buttons[1][1], message_id)
        await tap(bot, buttons[0][1], message_id)
        assert [label for label, _ in bot.api.buttons(CAESAR, message_id)][:2] == [
            "☑ Appia",
            "☑ Latina",
        ]
        await tap(bot, buttons[2][1], message_id)
        answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))
        assert '"Which roads?"="Latina, Appia"' in str(answer.params["text"])


async def test_deny_and_stop_cancel_and_the_stop_button(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    with_bash(castra_dir, "vorenus")
    async with running_bot(castra_dir, fake_cli, APPROVALS) as bot:
        start = await bot.ask(touch("vorenus", "stopped.txt"))
        message_id, prefix = await approval_message(bot, start)
        waiting = await bot.api.wait_for_call(
            "sendMessage", lambda c: str(c.params["text"]).startswith("⏸"), start=start
        )
        assert waiting.params["text"] == "⏸ vorenus is waiting for your approval: touch stopped.txt"
        assert await tap(bot, f"{prefix}:x", message_id) == "⛔ Denied, and the turn stopped"
        answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))
        assert "Interrupted" in str(answer.params["text"])
        assert not (workspace(castra_dir, "vorenus") / "stopped.txt").exists()

        # /stop while an approval waits: its buttons become "cancelled"
        start = await bot.ask(touch("vorenus", "cancelled.txt"))
        message_id, prefix = await approval_message(bot, start)
        bot.api.add_message("/stop vorenus")
        await bot.api.wait_for_call("editMessageReplyMarkup", start=start)
        assert bot.api.buttons(CAESAR, message_id) == [
            ("✖ cancelled", f"{prefix.rsplit(':', 1)[0]}:-:-")
        ]
        assert await tap(bot, f"{prefix}:o", message_id) == "Already decided."
        assert not (workspace(castra_dir, "vorenus") / "cancelled.txt").exists()

        # the Stop button on a running turn's status message (its text streams in a draft,
        # which cannot carry buttons)
        start = await bot.ask("@vorenus THINK hmm\nSLEEP 30")
        status = await bot.api.wait_for_call(
            "sendMessage", lambda c: c.params["text"] == "⏳ vorenus is working...", start=start
        )
        status_id = int(status.result["message_id"])
        assert bot.api.buttons(CAESAR, status_id) == [("⏹ Stop vorenus", "stop:vorenus")]
        assert await tap(bot, "stop:vorenus", status_id) == "Stopping vorenus."
        answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))
        assert "Interrupted" in str(answer.params["text"])


async def test_no_answer_in_time_and_a_question_answered_in_words(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    with_bash(castra_dir, "vorenus")
    quick = '[approvals]\nask = ["Bash(touch:*)"]\ntimeout = 0.01'
    async with running_bot(castra_dir, fake_cli, quick) as bot:
        start = await bot.ask(touch("vorenus", "late.txt"))
        message_id, _ = await approval_message(bot, start)
        answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))
        assert "did not answer within 0.01 minutes" in str(answer.params["text"])
        assert bot.api.messages[(CAESAR, message_id)]["text"].endswith(
            "⌛ No answer within 0.01 min: denied."
        )

        question = {
            "question": "Which legion?",
            "header": "Legion",
            "options": [
                {"label": "X", "description": "tenth"},
                {"label": "XIII", "description": "13"},
            ],
            "multiSelect": True,
        }
        start = await bot.ask(
            f"@vorenus TOOL AskUserQuestion {json.dumps({'questions': [question]})}"
        )
        await bot.api.wait_for_call(
            "sendMessage", lambda c: "asks: Which legion?" in str(c.params.get("text")), start=start
        )
        bot.api.add_message("the ninth, it is lost")
        answer = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))
        assert '"Which legion?"="the ninth, it is lost"' in str(answer.params["text"])


async def test_the_message_shows_what_runs_and_a_long_command_comes_whole_as_a_file(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    with_bash(castra_dir, "vorenus")
    async with running_bot(castra_dir, fake_cli, APPROVALS) as bot:
        call = {"command": "touch evil.txt", "description": "Print today's date (harmless)"}
        start = await bot.ask(f"@vorenus TOOL Bash {json.dumps(call)}")
        message_id, prefix = await approval_message(bot, start)
        text = bot.api.messages[(CAESAR, message_id)]["text"]
        command_at = text.index("touch evil.txt")
        said_at = text.index("Print today's date (harmless)")
        assert command_at < said_at
        assert "its own words, not checked" in text[command_at:said_at]
        assert await tap(bot, f"{prefix}:d", message_id) == "❌ Denied"
        await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))

        # 10,000 characters: the start and the end in the message, the whole as a file;
        # a right-to-left override or a carriage return cannot hide what runs
        middle = "x" * 10_000
        command = f"touch start.txt; echo {middle}\r; rm -rf ~/important\u202e"
        start = await bot.ask(f"@vorenus TOOL Bash {json.dumps({'command': command})}")
        message_id, prefix = await approval_message(bot, start)
        text = bot.api.messages[(CAESAR, message_id)]["text"]
        assert len(text) < 4096
        assert "touch start.txt" in text
        assert "rm -rf ~/important⟨U+202E⟩" in text and "⟨U+000D⟩" in text
        assert "characters left out" in text and "in the file below" in text
        document = await bot.api.wait_for_call("sendDocument", start=start)
        assert document.params.get("reply_to_message_id") == message_id or document.params.get(
            "reply_parameters"
        )
        [upload] = [u for u in bot.api.uploads if u.method == "sendDocument"]
        assert upload.content.decode() == command
        assert upload.chat_id == CAESAR and "vorenus" in upload.caption
        assert await tap(bot, f"{prefix}:d", message_id) == "❌ Denied"
        await bot.answer(start, lambda t: t.startswith("⚔️ vorenus —"))
