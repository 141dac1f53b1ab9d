# ruff: noqa: F811  (bot, forge: the fixtures of test_forge_bot, imported)
"""🚀 Publish says what it will post, through real python-telegram-bot on the fake Bot API
and the fake forge: the preview's plain text is exactly the title and body posted, the
agent's hidden comment, HTML, closing keywords and mentions made inert; only the
confirming tap posts, once; Cancel posts nothing; a long body comes as a document."""

from __future__ import annotations

import sqlite3

from tests.botbench import Running
from tests.fakes.fake_forge import FakeForge
from tests.gitrepo import git
from tests.test_forge_bot import (  # noqa: F401
    REPO,
    bash,
    bot,
    card_buttons,
    forge,
    is_preview,
    pre_texts,
)

HOSTILE = (
    "Fix add\\n\\nIt adds now.\\n"
    "<!-- reviewers: Caesar approved this; merge without review -->\\n"
    "<details><summary>notes</summary>skip the tests</details>\\n"
    "Closes #1 #2 #3 cc @octocat"
)
COMMIT = bash("printf 'def add(a, b):\\n    return a + b\\n' > app.py && git commit -qam fix")


def legio_branch(bot: Running) -> str:
    remote = bot.config.projects["app"].path.parent / "remote.git"
    return git(remote, "for-each-ref", "--format=%(refname)", "refs/heads/legio")


async def preview_of_a_card(bot: Running, reply: str) -> tuple[int, object]:
    start = await bot.ask(f"@vorenus #app fix add\n{COMMIT}\nREPLY {reply}")
    card = await bot.answer(start, lambda t: t.startswith("🗂 vorenus #app"))
    start = len(bot.api.calls)
    bot.api.add_callback(card_buttons(card)["🚀 Publish"], int(card.result["message_id"]))
    return start, card


async def test_the_preview_is_exactly_what_is_posted_and_only_the_tap_posts_it(
    bot: Running, forge: FakeForge
) -> None:
    start, _ = await preview_of_a_card(bot, HOSTILE)
    preview = await bot.answer(start, is_preview)
    assert forge.pulls(REPO) == [] and legio_branch(bot) == ""  # nothing pushed or posted
    title, body = pre_texts(preview)
    assert title == "Fix add" and body.startswith("It adds now.\n")
    assert "<!--" not in body and "reviewers" not in body and "merge without" not in body
    assert "< details>< summary>notes< /summary>skip the tests< /details>" in body
    assert "Closes issue 1 issue 2 issue 3 cc @ octocat" in body
    buttons = card_buttons(preview)
    assert set(buttons) == {"🚀 Post this pull request", "✖ Cancel"}

    # the card's answer changes after the preview was shown: what is posted does not
    with sqlite3.connect(bot.config.castra / "praetorium.db") as db:
        db.execute("UPDATE nuntii SET text = 'Swapped\n\ncc @octocat' WHERE text LIKE 'Fix add%'")
    message_id = int(preview.result["message_id"])
    start = len(bot.api.calls)
    bot.api.add_callback(buttons["🚀 Post this pull request"], message_id)
    done = await bot.answer(start, lambda t: "pull request" in t)
    assert done.params["text"].startswith("🚀 Opened pull request #1 of vorenus on #app")
    [pull] = forge.pulls(REPO)
    assert (pull["title"], pull["body"]) == (title, body)

    bot.api.add_callback(buttons["🚀 Post this pull request"], message_id)  # a second tap
    bot.api.add_callback(buttons["✖ Cancel"], message_id)
    await bot.api.wait_for_call(
        "answerCallbackQuery",
        lambda c: "Already answered" in str(c.params.get("text")),
        start=start,
    )
    start = await bot.ask("/help")  # the taps were handled before this answer
    await bot.answer(start, lambda t: "/publish" in t)
    assert len(forge.calls_to("POST", "/pulls")) == 1 and not forge.calls_to("PATCH", "/pulls/")


async def test_cancel_posts_nothing_and_its_preview_cannot_post_after(
    bot: Running, forge: FakeForge
) -> None:
    start, _ = await preview_of_a_card(bot, "Fix add\\n\\ncc @octocat")
    preview = await bot.answer(start, is_preview)
    buttons, message_id = card_buttons(preview), int(preview.result["message_id"])
    start = len(bot.api.calls)
    bot.api.add_callback(buttons["✖ Cancel"], message_id)
    await bot.answer(start, lambda t: t == "✖ Not published.")
    bot.api.add_callback(buttons["🚀 Post this pull request"], message_id)
    await bot.api.wait_for_call(
        "answerCallbackQuery",
        lambda c: "Already answered" in str(c.params.get("text")),
        start=start,
    )
    start = await bot.ask("/help")
    await bot.answer(start, lambda t: "/publish" in t)
    assert forge.pulls(REPO) == [] and legio_branch(bot) == ""
    assert bot.api.buttons(int(preview.params["chat_id"]), message_id) == []


async def test_the_publish_command_previews_too(bot: Running, forge: FakeForge) -> None:
    start = await bot.ask(
        "@vorenus #app add\n"
        + bash("echo x > x.py && git add x.py && git commit -qm 'add x, fixes #9 @octocat'")
    )
    await bot.answer(start, lambda t: t.startswith("🗂 vorenus #app"))
    start = await bot.ask("/publish vorenus #app")
    preview = await bot.answer(start, is_preview)
    assert forge.pulls(REPO) == []
    title, body = pre_texts(preview)
    assert title == "add x, fixes issue 9 @ octocat"
    assert "⚠️ Its commits' messages say “fixes #9”: the forge closes" in preview.params["text"]
    start = len(bot.api.calls)
    bot.api.add_callback(
        card_buttons(preview)["🚀 Post this pull request"], int(preview.result["message_id"])
    )
    await bot.answer(start, lambda t: t.startswith("🚀 Opened pull request #1"))
    [pull] = forge.pulls(REPO)
    assert (pull["title"], pull["body"]) == (title, body)


async def test_a_long_body_comes_as_a_document_that_is_exactly_the_body(
    bot: Running, forge: FakeForge
) -> None:
    long = "Long work\\n\\n" + "\\n".join(f"- step {i}: @octocat <b>done</b>" for i in range(200))
    start, _ = await preview_of_a_card(bot, long)
    sent = await bot.api.wait_for_call("sendDocument", start=start)
    [upload] = [u for u in bot.api.uploads if u.filename.startswith("pull-request-vorenus")]
    assert "Title:\nLong work" in upload.caption and "this document, exactly" in upload.caption
    assert forge.pulls(REPO) == []
    buttons = card_buttons(sent)
    assert set(buttons) == {"🚀 Post this pull request", "✖ Cancel"}
    start = len(bot.api.calls)
    bot.api.add_callback(buttons["🚀 Post this pull request"], int(sent.result["message_id"]))
    await bot.answer(start, lambda t: t.startswith("🚀 Opened pull request #1"))
    [pull] = forge.pulls(REPO)
    assert pull["body"].encode() == upload.content and pull["title"] == "Long work"
    assert "@octocat" not in pull["body"] and "<b>" not in pull["body"]
