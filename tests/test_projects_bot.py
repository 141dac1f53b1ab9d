"""Projects in Telegram (real python-telegram-bot on the fake Bot API, agents on the fake CLI,
real git): a #name request answered under ``⚔️ vorenus #app``, ``/diff`` as a summary, the
short diff shown preformatted and the whole as a ``.diff`` document, ``/projects``."""

from __future__ import annotations

from pathlib import Path

from tests.botbench import running_bot
from tests.conftest import FakeCli
from tests.fakes.bot_api import FakeBotApi
from tests.gitrepo import git, make_project


async def test_diff_and_projects_in_telegram(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "app")
    extra = f'[projects.app]\npath = "{project}"\n'
    async with running_bot(castra_dir, fake_cli, extra) as bot:
        call = await bot.answer(await bot.ask("@vorenus #app look at the tests"))
        assert str(call.params["text"]).startswith("⚔️ vorenus #app — ")
        call = await bot.answer(await bot.ask("#nope @vorenus do it"))
        assert "#nope is not a project. The projects: #app" in call.params["text"]

        copy = castra_dir / "centuriones" / "vorenus" / "projects" / "app"
        (copy / "app.py").write_text("def add(a, b):\n    return a + b\n")
        git(copy, "commit", "--quiet", "-am", "fix add", caesar=False)

        start = await bot.ask("/diff vorenus #app")
        summary = await bot.answer(start, lambda t: t.startswith("vorenus on #app"))
        assert "1 commit ahead of main" in summary.params["text"]
        assert "fix add" in summary.params["text"]
        shown = await bot.answer(start, lambda t: t.startswith("diff --git") or "app.py |" in t)
        [entity] = shown.params["entities"]
        assert (entity["type"], entity["language"]) == ("pre", "diff")
        document = await bot.api.wait_for_call("sendDocument", start=start)
        [upload] = [u for u in bot.api.uploads if u.filename == "vorenus-app.diff"]
        assert b"+    return a + b" in upload.content
        assert document.status == 200
        photo = await bot.api.wait_for_call("sendPhoto", start=start)  # drawn for a phone
        assert str(photo.params["caption"]).startswith("app.py · +1 −1")
        await bot.api.wait_for_call("sendDocument", lambda c: ".html" in str(c.params), start=start)
        [page] = [u for u in bot.api.uploads if u.filename == "vorenus-app.html"]
        assert b"<script" not in page.content.lower()

        call = await bot.answer(await bot.ask("/projects"), lambda t: t.startswith("#app"))
        assert "vorenus: legio/vorenus/main, 1 ahead, last: fix add" in call.params["text"]
        call = await bot.answer(await bot.ask("/drop vorenus app"))
        assert call.params["text"].startswith("Dropped vorenus's copy of #app")
    assert "legio/vorenus/main" in git(project, "branch", "--list", "legio/*")


async def test_project_binds_a_topic(castra_dir: Path, fake_cli: FakeCli, tmp_path: Path) -> None:
    project = make_project(tmp_path / "app")
    api = FakeBotApi()
    api.has_topics_enabled = True
    extra = f'[projects.app]\npath = "{project}"\n'
    async with running_bot(castra_dir, fake_cli, extra, api=api) as bot:
        made = {
            c.params["name"]: c.result["message_thread_id"]
            for c in api.calls_of("createForumTopic")
        }
        lane = made["vorenus"]
        start = len(api.calls)
        api.add_message("/project app", thread_id=lane)
        call = await bot.answer(start)
        assert call.params["text"].startswith("Every request in this topic is on #app now")
        assert int(call.params["message_thread_id"]) == lane
        start = len(api.calls)
        api.add_message("REPLY on it", thread_id=lane)
        call = await bot.answer(start, lambda t: t.startswith("⚔️ vorenus"))
        assert call.params["text"].startswith("⚔️ vorenus #app — ")
        start = len(api.calls)
        api.add_message("/project off", thread_id=lane)
        assert (await bot.answer(start)).params["text"] == "This topic is on no project now."
        call = await bot.answer(await bot.ask("/project app"))
        assert call.params["text"].startswith("/project works inside a topic")
