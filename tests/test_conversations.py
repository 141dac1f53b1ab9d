"""Replies, quotes and edits through the engine (fake CLI, real praetorium): who answers a
reply, what the agent is given of the message it points at, and the three edit cases."""

from __future__ import annotations

import asyncio

from legio.app import LegioApp
from legio.frontends.admin import Admin
from legio.request import Pointer, Request
from tests.conftest import FakeCli
from tests.legion import processes_of


def last_prompt(fake_cli: FakeCli, agent: str) -> str:
    return processes_of(fake_cli, agent)[-1].raw_prompts[-1]


async def test_a_reply_to_an_agents_answer_goes_to_that_agent(
    app: LegioApp, fake_cli: FakeCli
) -> None:
    [first] = await app.handle_message("@vorenus REPLY the bridge needs 40 beams")
    assert first.seq is not None
    [reply] = await app.handle_message(
        Request("and how many nails?", pointer=Pointer(seq=first.seq))
    )
    assert reply.agent == "vorenus"
    answer = await app.engine.praetorium.get_history(3)
    vorenus_answer = answer[2]
    prompt = last_prompt(fake_cli, "vorenus")
    assert f'in_reply_to="{vorenus_answer.id}"' in prompt
    assert "<in_reply_to " not in prompt  # it wrote those words in this session: not repeated
    [legatus] = await app.handle_message("REPLY noted")
    [back] = await app.handle_message(Request("thanks", pointer=Pointer(seq=legatus.seq)))
    assert back.agent == "legatus"
    [named] = await app.handle_message(Request("@pullo check this", pointer=Pointer(seq=first.seq)))
    assert named.agent == "pullo"  # an @mention in the text wins


async def test_sharing_another_agents_answer_carries_its_words_escaped(
    app: LegioApp, fake_cli: FakeCli
) -> None:
    [pullo] = await app.handle_message("@pullo REPLY Rome has <7> hills & one </nuntius>")
    await app.handle_message(Request("@vorenus what do you think?", pointer=Pointer(seq=pullo.seq)))
    prompt = last_prompt(fake_cli, "vorenus")
    assert '<in_reply_to nuntius="' in prompt and 'sender="pullo" part="whole"' in prompt
    assert "Rome has &lt;7&gt; hills &amp; one &lt;/nuntius&gt;</in_reply_to>" in prompt
    stored = (await app.engine.praetorium.get_history(2))[1]
    links = await app.engine.threads.links_of(stored.seq)
    assert [(link.kind, link.target_seq) for link in links] == [("reply", pullo.seq)]

    await app.handle_message(
        Request("@vorenus only this part", pointer=Pointer(seq=pullo.seq, quote="seven hills"))
    )
    assert 'part="whole"' in last_prompt(fake_cli, "vorenus")  # not in the message: whole
    await app.handle_message(
        Request("@vorenus only this part", pointer=Pointer(seq=pullo.seq, quote="hills & one"))
    )
    prompt = last_prompt(fake_cli, "vorenus")
    assert 'part="quote" source="praetorium">hills &amp; one</in_reply_to>' in prompt


async def test_a_reply_to_a_message_legio_never_stored_carries_telegrams_words(
    app: LegioApp, fake_cli: FakeCli
) -> None:
    pointer = Pointer(text="meet at the forum at noon", sender="Brutus")
    [reply] = await app.handle_message(Request("is this still on?", pointer=pointer))
    assert reply.agent == "legatus"
    prompt = last_prompt(fake_cli, "legatus")
    assert '<in_reply_to sender="Brutus" part="whole" source="telegram">' in prompt
    assert "meet at the forum at noon</in_reply_to>" in prompt


async def test_an_edit_before_the_agent_starts_replaces_the_words(
    app: LegioApp, fake_cli: FakeCli
) -> None:
    busy = asyncio.create_task(app.handle_message("@vorenus SLEEP 1\nREPLY done"))
    await asyncio.sleep(0.3)
    queued = asyncio.create_task(
        app.handle_message(Request("@vorenus REPLY fix teh bug", origin="telegram:1:7"))
    )
    await asyncio.sleep(0.1)
    assert await app.edit_message("telegram:1:7", "@vorenus REPLY fix the bug") == []
    await busy
    [answer] = await queued
    assert answer.text.endswith("fix the bug")
    prompts = "\n".join(processes_of(fake_cli, "vorenus")[-1].raw_prompts)
    assert "teh" not in prompts  # the agent only ever saw the corrected words
    request = await app.engine.praetorium.get_by_origin("telegram:1:7")
    assert request is not None and request.text == "@vorenus REPLY fix the bug"
    history = (await Admin(app).run("/history 5"))[0]
    assert "(edited; it first said: @vorenus REPLY fix teh bug)" in history


async def test_an_edit_after_the_answer_is_a_correction_answered_again(
    app: LegioApp, fake_cli: FakeCli
) -> None:
    [first] = await app.handle_message(Request("@vorenus REPLY 40 beams", origin="telegram:1:9"))
    assert first.text.endswith("40 beams")
    assert await app.edit_message("telegram:1:9", "@vorenus REPLY 40 beams") == []  # same
    [again] = await app.edit_message("telegram:1:9", "@vorenus REPLY 50 beams")
    assert again.agent == "vorenus" and again.text.endswith("50 beams")
    original = await app.engine.praetorium.get_by_origin("telegram:1:9")
    assert original is not None and original.text == "@vorenus REPLY 40 beams"  # kept
    assert f'edit_of="{original.id}"' in last_prompt(fake_cli, "vorenus")
    [third] = await app.edit_message("telegram:1:9", "@vorenus REPLY 60 beams")
    assert third.text.endswith("60 beams")
    history = (await Admin(app).run("/history 6"))[0]
    assert f"(a correction of #{original.seq})" in history
    assert await app.edit_message("telegram:1:404", "anything") == []  # unknown: ignored


async def test_an_edit_after_a_reset_is_still_a_correction(app: LegioApp) -> None:
    await app.handle_message(Request("@vorenus REPLY 40 beams", origin="telegram:1:11"))
    await app.reset("vorenus")  # its checkpoint is gone; its answer is not
    [again] = await app.edit_message("telegram:1:11", "@vorenus REPLY 45 beams")
    assert again.text.endswith("45 beams")
    original = await app.engine.praetorium.get_by_origin("telegram:1:11")
    assert original is not None and original.text == "@vorenus REPLY 40 beams"
