"""Approvals and questions with the real bundled Claude CLI, on the fake Messages API.

A scripted asker stands in for Caesar (the Telegram buttons are tested in
``test_approvals_bot.py``): the CLI's own ``can_use_tool`` path is what runs here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from legio.request import ApprovalRequest, Decision, QuestionRequest
from tests.conftest import FakeCli
from tests.fakes.messages_api import PINNED_MODEL, FakeMessagesApi
from tests.legion import Legion

APPROVALS = '[approvals]\nask = ["Bash(touch:*)"]\ntimeout = {timeout}\n'


class ScriptedCaesar:
    """Answers approval requests from a queue; ``None`` in the queue: never answers."""

    def __init__(self) -> None:
        self.decisions: list[Decision | None] = []
        self.answers: list[dict[str, str]] = []
        self.requests: list[ApprovalRequest] = []
        self.questions: list[QuestionRequest] = []
        self.ended: list[str | None] = []

    async def approve(self, request: ApprovalRequest) -> Decision:
        self.requests.append(request)
        decision = self.decisions.pop(0)
        if decision is None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.ended.append(request.outcome)
                raise
        assert decision is not None
        return decision

    async def answer(self, request: QuestionRequest) -> dict[str, str] | None:
        self.questions.append(request)
        return self.answers.pop(0)


def with_bash(castra_dir: Path, name: str = "vorenus") -> Path:
    """Give a centurio the Bash tool; its workspace."""
    prompt = castra_dir / "centuriones" / name / "prompt.md"
    text = prompt.read_text(encoding="utf-8")
    prompt.write_text(text.replace("---\n", "---\ntools: [Bash]\n", 1), encoding="utf-8")
    return castra_dir / "centuriones" / name / "workspace"


def bash(command: str) -> str:
    return f"CALL_TOOL Bash {json.dumps({'command': command})}"


@pytest.fixture
async def approving(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> AsyncIterator[tuple[Legion, ScriptedCaesar, Path]]:
    caesar = ScriptedCaesar()
    workspace = with_bash(castra_dir)
    with FakeMessagesApi() as api:
        legion = await Legion(
            castra_dir,
            fake_cli,
            cli_path="",
            model=PINNED_MODEL,
            env=api.safe_cli_env(tmp_path / "cli"),
            asker=caesar,
            toml=APPROVALS.format(timeout=10),
        ).start()
        try:
            yield legion, caesar, workspace
        finally:
            await legion.stop()


async def test_allow_runs_deny_does_not_and_the_model_reads_the_reason(
    approving: tuple[Legion, ScriptedCaesar, Path],
) -> None:
    legion, caesar, workspace = approving
    caesar.decisions = [Decision("once"), Decision("deny", "not on a feast day")]
    reply = (await legion.say(["vorenus"], bash("bash -c 'touch allowed.txt'")))["vorenus"]
    assert (workspace / "allowed.txt").exists()
    assert reply.startswith("TOOL_RESULT")
    request = caesar.requests[0]
    assert (request.agent, request.rules) == ("vorenus", ("Bash(touch:*)",))
    assert "touch allowed.txt" in request.target

    reply = (await legion.say(["vorenus"], bash("env X=1 touch denied.txt")))["vorenus"]
    assert not (workspace / "denied.txt").exists()
    assert "Caesar denied this call. His reason: not on a feast day" in reply

    reply = (await legion.say(["vorenus"], bash("echo free")))["vorenus"]  # no rule: not asked
    assert "free" in reply
    assert len(caesar.requests) == 2


async def test_session_and_always_grants_then_a_restart(
    approving: tuple[Legion, ScriptedCaesar, Path],
) -> None:
    legion, caesar, workspace = approving
    caesar.decisions = [Decision("session")]
    await legion.say(["vorenus"], bash("touch one.txt"))
    await legion.say(["vorenus"], bash("touch two.txt"))  # the same session: not asked again
    assert (workspace / "two.txt").exists()
    assert len(caesar.requests) == 1

    await legion.manager.reset("vorenus")  # a new session: asked again
    caesar.decisions = [Decision("always")]
    await legion.say(["vorenus"], bash("touch three.txt"))
    assert len(caesar.requests) == 2
    await legion.restart()
    await legion.manager.reset("vorenus")
    await legion.say(["vorenus"], bash("touch four.txt"))
    assert (workspace / "four.txt").exists()
    assert len(caesar.requests) == 2  # "always" survived the restart

    assert legion.gate is not None
    [grant] = await legion.gate.grants()
    assert (grant.agent, grant.rule) == ("vorenus", "Bash(touch:*)")
    assert await legion.gate.revoke(grant.id) == grant
    caesar.decisions = [Decision("deny")]
    await legion.say(["vorenus"], bash("touch five.txt"))
    assert len(caesar.requests) == 3
    assert not (workspace / "five.txt").exists()


async def test_no_answer_in_time_is_a_deny(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> None:
    caesar = ScriptedCaesar()
    caesar.decisions = [None]
    workspace = with_bash(castra_dir)
    with FakeMessagesApi() as api:
        legion = await Legion(
            castra_dir,
            fake_cli,
            cli_path="",
            model=PINNED_MODEL,
            env=api.safe_cli_env(tmp_path / "cli"),
            asker=caesar,
            toml=APPROVALS.format(timeout=0.005),  # 0.3 s
        ).start()
        try:
            reply = (await legion.say(["vorenus"], bash("touch late.txt")))["vorenus"]
        finally:
            await legion.stop()
    assert not (workspace / "late.txt").exists()
    assert "Caesar did not answer within 0.005 minutes, so this is denied" in reply
    assert caesar.ended == ["timeout"]


async def test_an_agents_question_goes_to_caesar_and_his_answer_back(
    approving: tuple[Legion, ScriptedCaesar, Path],
) -> None:
    legion, caesar, _ = approving
    question = {
        "question": "Which road to Capua?",
        "header": "Road",
        "options": [
            {"label": "Via Appia", "description": "the old road south"},
            {"label": "Via Latina", "description": "inland"},
        ],
        "multiSelect": False,
    }
    caesar.answers = [{"Which road to Capua?": "Via Appia"}]
    call = f"CALL_TOOL AskUserQuestion {json.dumps({'questions': [question]})}"
    reply = (await legion.say(["vorenus"], call))["vorenus"]
    assert caesar.questions[0].questions[0]["question"] == "Which road to Capua?"
    assert '"Which road to Capua?"="Via Appia"' in reply


async def test_caesar_is_shown_the_command_not_the_agents_description_of_it(
    approving: tuple[Legion, ScriptedCaesar, Path],
) -> None:
    """A tricked agent calls ``touch evil.txt`` "to print today's date": the request
    carries the command itself; the description only beside it, as the agent's words."""
    legion, caesar, workspace = approving
    caesar.decisions = [Decision("deny")]
    call = {"command": "touch evil.txt", "description": "Print today's date (read-only, harmless)"}
    await legion.say(["vorenus"], f"CALL_TOOL Bash {json.dumps(call)}")
    [request] = caesar.requests
    assert request.target == "touch evil.txt"
    assert request.full_target == "touch evil.txt"
    assert request.description == "Print today's date (read-only, harmless)"
    assert not (workspace / "evil.txt").exists()


async def test_shell_tricks_ask_and_an_always_grant_covers_exactly_that_command(
    approving: tuple[Legion, ScriptedCaesar, Path],
) -> None:
    """Commands the word-list matcher let through now ask (the real CLI runs them in
    its sandbox when allowed); "Always" for one of them covers that command only."""
    legion, caesar, workspace = approving
    caesar.decisions = [Decision("deny"), Decision("deny"), Decision("deny")]
    for dodge in (
        "if true; then touch a.txt; fi",
        "echo touch b.txt | bash",
        "G=touch; $G c.txt",
    ):
        await legion.say(["vorenus"], bash(dodge))
    assert [r.full_target for r in caesar.requests] == [
        "if true; then touch a.txt; fi",
        "echo touch b.txt | bash",
        "G=touch; $G c.txt",
    ]
    assert all(r.opaque for r in caesar.requests)
    assert not any((workspace / f).exists() for f in ("a.txt", "b.txt", "c.txt"))

    loop = "for f in d.txt; do touch $f; done"
    caesar.decisions = [Decision("always")]
    await legion.say(["vorenus"], bash(loop))
    assert (workspace / "d.txt").exists()
    await legion.say(["vorenus"], bash(loop))  # granted: not asked again
    assert len(caesar.requests) == 4
    caesar.decisions = [Decision("deny")]
    await legion.say(["vorenus"], bash("for f in e.txt; do touch $f; done"))
    assert len(caesar.requests) == 5
    assert not (workspace / "e.txt").exists()
