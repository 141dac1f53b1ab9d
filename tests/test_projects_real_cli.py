"""Projects for real: the bundled CLI under bubblewrap, on the fake Messages API, in an
agent's copy of a real git repository.

The fake model runs one built-in tool per message (``CALL_TOOL Bash {...}``) and answers
with its result, so each test sees what the agent's shell saw. A scripted Caesar answers
approvals (a ``git push`` asks).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from legio.fence.policy import scrub_environment
from legio.fence.sandbox import detect_sandbox
from legio.request import Decision
from tests.conftest import FakeCli
from tests.fakes.messages_api import PINNED_MODEL, FakeMessagesApi
from tests.gitrepo import git, make_project, snapshot
from tests.legion import Legion
from tests.test_approvals_real_cli import ScriptedCaesar


@dataclass
class OnProject:
    legion: Legion
    caesar: ScriptedCaesar
    project: Path
    copies: Path  # castra/centuriones/<agent>/projects/app for vorenus
    api: FakeMessagesApi

    async def call(self, tool: str, args: dict[str, object], agent: str = "vorenus") -> str:
        text = f"CALL_TOOL {tool} {json.dumps(args)}"
        reply = (await self.legion.say([agent], text, project="app"))[agent]
        assert reply.startswith("TOOL_RESULT: "), reply
        return reply.removeprefix("TOOL_RESULT: ")

    async def bash(self, command: str, agent: str = "vorenus") -> str:
        return await self.call("Bash", {"command": command}, agent)


@pytest.fixture
async def on_project(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> AsyncIterator[OnProject]:
    assert detect_sandbox().available, "install bubblewrap and socat (.ci/run does)"
    project = make_project(tmp_path / "app")
    caesar = ScriptedCaesar()
    with FakeMessagesApi() as api:
        legion = Legion(
            castra_dir,
            fake_cli,
            cli_path="",
            model=PINNED_MODEL,
            env=api.safe_cli_env(tmp_path / "cli"),
            asker=caesar,
            toml_tail=f'[sandbox]\nallowed_domains = []\n[projects.app]\npath = "{project}"\n',
        )
        await legion.start()
        scrub_environment(legion.config)
        copies = (castra_dir / "centuriones" / "vorenus" / "projects" / "app").resolve()
        try:
            yield OnProject(legion, caesar, project, copies, api)
        finally:
            await legion.stop()


async def test_the_agent_works_and_commits_in_its_copy_and_caesar_sees_the_branch(
    on_project: OnProject,
) -> None:
    s = on_project
    before = snapshot(s.project)
    assert await s.bash("pwd") == str(s.copies)
    status = await s.bash("git status")
    assert "On branch legio/vorenus/main" in status
    assert "nothing to commit" in status
    done = await s.bash(
        "printf 'def add(a, b):\\n    return a + b\\n' > app.py && "
        "git commit -q -am 'fix add' && git log -1 --format='%an: %s'"
    )
    assert done == "vorenus (Legio): fix add"
    after = snapshot(s.project)
    assert "refs/heads/legio/vorenus/main" in after.pop("branches")
    before.pop("branches")
    assert after == before  # Caesar's files, HEAD, config, uncommitted work untouched
    assert git(s.project, "log", "-1", "--format=%s", "legio/vorenus/main") == "fix add\n"
    assert "return a - b" in (s.project / "app.py").read_text()


async def test_the_project_checkout_and_the_copys_git_internals_are_out_of_reach(
    on_project: OnProject,
) -> None:
    s = on_project
    before = snapshot(s.project)
    text = await s.bash(f"echo evil > {s.project}/app.py")  # the path guard says why
    assert "the project's own checkout is Caesar's" in text, text
    d = f"d={s.project}; "  # spelled so that only the sandbox can tell: it holds by itself
    for command in (
        "echo evil > $d/app.py",
        "echo evil >> $d/.git/config",
        "git -C $d branch stolen",
        "echo evil > $d/.git/refs/heads/main",
        "echo '[core] fsmonitor = evil' >> .git/config",
        "git config core.pager 'touch /tmp/pwned'",
        "echo 'echo evil' > .git/hooks/post-commit",
        "echo /tmp > .git/objects/info/alternates",
    ):
        text = await s.bash(d + command)
        refused = (
            "Read-only file system",
            "could not lock config",
            "Legio's policy",
            "Legio refuses this line",
        )
        assert any(r in text for r in refused), (command, text)
    # the file tools: the CLI's own deny rule, else Legio's path guard
    denied = ("denied by your permission settings", "Legio's policy")
    text = await s.call("Write", {"file_path": str(s.project / "app.py"), "content": "x"})
    assert any(d in text for d in denied), text
    text = await s.call("Write", {"file_path": str(s.copies / ".git" / "config"), "content": "x"})
    assert any(d in text for d in denied), text
    assert "fsmonitor" not in (s.copies / ".git" / "config").read_text()
    assert snapshot(s.project) == before


async def test_a_push_waits_for_caesar(on_project: OnProject) -> None:
    s = on_project
    s.caesar.decisions = [Decision("deny", "not yet")]
    text = await s.bash("git push origin legio/vorenus/main")
    assert "Caesar denied this call. His reason: not yet" in text
    [request] = s.caesar.requests
    assert request.agent == "vorenus" and "git push origin legio/vorenus/main" in request.target


async def test_two_agents_on_one_project_in_parallel_and_back_to_the_workspace(
    on_project: OnProject, castra_dir: Path
) -> None:
    s = on_project
    script = "echo {who} > who.txt && git add who.txt && git commit -qm {who} && pwd"
    text = f"CALL_TOOL Bash {json.dumps({'command': script})}"
    replies = await asyncio.gather(
        s.legion.say(["vorenus"], text.replace("{who}", "vorenus"), project="app"),
        s.legion.say(["pullo"], text.replace("{who}", "pullo"), project="app"),
    )
    pullo_copy = (castra_dir / "centuriones" / "pullo" / "projects" / "app").resolve()
    assert replies[0]["vorenus"] == f"TOOL_RESULT: {s.copies}"
    assert replies[1]["pullo"] == f"TOOL_RESULT: {pullo_copy}"
    assert (s.copies / "who.txt").read_text() == "vorenus\n"
    assert (pullo_copy / "who.txt").read_text() == "pullo\n"
    assert git(s.project, "show", "legio/pullo/main:who.txt") == "pullo\n"
    assert git(s.project, "show", "legio/vorenus/main:who.txt") == "vorenus\n"
    text = await s.bash(f"cat {pullo_copy}/who.txt")  # another agent's copy: not its to see
    assert "pullo's folder is not yours" in text
    sneaky = str(pullo_copy).replace("/pullo/", "/${p}lo/")
    text = await s.bash(f"p=pul; cat {sneaky}/who.txt")
    assert "No such file or directory" in text and "pullo\n" not in text
    # the next request without a project: its workspace again, the same conversation
    reply = (await s.legion.say(["vorenus"], 'CALL_TOOL Bash {"command": "pwd"}'))["vorenus"]
    workspace = (castra_dir / "centuriones" / "vorenus" / "workspace").resolve()
    assert reply == f"TOOL_RESULT: {workspace}"
    last = s.api.requests[-1]
    assert "who.txt" in json.dumps(last["messages"])  # its earlier turn is in its context
