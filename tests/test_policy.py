"""Agent policy: no secrets in agents' environment, per-agent tools, the path guard."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from legio.castra import Castra
from legio.legatus import Legatus
from legio.memoria import MemoriaStore
from legio.policy import PathGuard, denied_env_names
from tests.conftest import FakeCli
from tests.legion import fake_cli_config, processes_of

DENIED = "PreToolUse:{tool} hook error: Legio's policy: "


def give_tools(castra_dir: Path, name: str, tools: str) -> None:
    prompt = castra_dir / "centuriones" / name / "prompt.md"
    prompt.write_text(
        prompt.read_text().replace("---\ndescription", f"---\ntools: [{tools}]\ndescription", 1)
    )


@pytest.fixture
async def legatus(castra_dir: Path, fake_cli: FakeCli) -> AsyncIterator[Legatus]:
    give_tools(castra_dir, "vorenus", "Read, Write, Bash, Glob, Grep")
    legatus = await Legatus.open(fake_cli_config(castra_dir, fake_cli))
    yield legatus
    await legatus.close()


async def use(legatus: Legatus, tool: str, args: dict[str, object], who: str = "vorenus") -> str:
    [reply] = await legatus.handle_message(f"@{who} TOOL {tool} {json.dumps(args)}")
    return reply.text.split("━━━━━━━━━━━━\n", 1)[-1]


async def test_agents_never_see_the_telegram_token_or_denied_variables(
    castra_dir: Path, fake_cli: FakeCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:SECRET")
    monkeypatch.setenv("OTHER_BOT_TOKEN", "456:SECRET")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-keep")
    path = castra_dir.parent / "legio.toml"
    path.write_text(
        f'[claude]\ncli_path = "{fake_cli.path}"\nenv_deny = ["*_BOT_TOKEN", "AWS_*"]\n'
    )
    from legio.config import load_config

    legatus = await Legatus.open(load_config(path))
    try:
        await legatus.handle_message('@vorenus TOOL Bash {"command": "env"}')
    finally:
        await legatus.close()
    [process] = processes_of(fake_cli, "vorenus")
    assert "TELEGRAM_BOT_TOKEN" not in process.env
    assert "OTHER_BOT_TOKEN" not in process.env
    assert "AWS_SECRET_ACCESS_KEY" not in process.env
    assert process.env["ANTHROPIC_API_KEY"] == "sk-keep"
    assert "PATH" in process.env


def test_denied_names_follow_patterns_but_keep_claude_credentials(
    castra_dir: Path, fake_cli: FakeCli
) -> None:
    config = fake_cli_config(castra_dir, fake_cli)
    env = {
        "TELEGRAM_BOT_TOKEN": "x",
        "MY_BOT_TOKEN": "y",
        "TELEGRAM_CHAT": "z",
        "ANTHROPIC_API_KEY": "k",
    }
    assert denied_env_names(config, env) == ["MY_BOT_TOKEN", "TELEGRAM_BOT_TOKEN", "TELEGRAM_CHAT"]


async def test_reading_another_centurios_commentarium_is_denied(
    legatus: Legatus, castra_dir: Path
) -> None:
    note = MemoriaStore(castra_dir).write_commentarium("pullo", "Secret", "pullo's secret", "pullo")
    path = castra_dir / "centuriones" / "pullo" / "commentarii" / f"{note.name}.xml"
    text = await use(legatus, "Read", {"file_path": str(path)})
    assert text.startswith(
        "TOOL_RESULT: " + DENIED.format(tool="Read") + "pullo's folder is not yours"
    )
    assert "pullo's secret" not in text
    relative = await use(legatus, "Read", {"file_path": f"../../pullo/commentarii/{note.name}.xml"})
    assert "pullo's folder is not yours" in relative


async def test_writing_in_its_own_workspace_is_allowed(legatus: Legatus, castra_dir: Path) -> None:
    text = await use(legatus, "Write", {"file_path": "review.md", "content": "LGTM"})
    assert text.startswith("TOOL_RESULT: File created successfully")
    assert (
        castra_dir / "centuriones" / "vorenus" / "workspace" / "review.md"
    ).read_text() == "LGTM"
    outside = castra_dir.parent / "project" / "notes.txt"
    outside.parent.mkdir()
    text = await use(legatus, "Write", {"file_path": str(outside), "content": "ok"})
    assert outside.read_text() == "ok"


async def test_bash_reading_the_praetorium_is_denied(legatus: Legatus) -> None:
    text = await use(legatus, "Bash", {"command": "cat ../../../praetorium.db"})
    assert "the praetorium (Legio's message store) is not for agents" in text
    text = await use(legatus, "Bash", {"command": "cd ../../.. && sqlite3 praetorium.db .dump"})
    assert DENIED.format(tool="Bash") in text
    text = await use(legatus, "Bash", {"command": "echo hi > ../prompt.md"})
    assert "prompts are Caesar's to edit" in text
    text = await use(legatus, "Bash", {"command": "echo fine"})
    assert text == "TOOL_RESULT: fine"


async def test_protected_files_and_tricks(
    legatus: Legatus, castra_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="legio.policy")
    castra = castra_dir.resolve()
    cases = [
        ("Read", {"file_path": str(castra / "praetorium.db-wal")}, "the praetorium"),
        (
            "Write",
            {"file_path": str(castra / "centuriones" / "vorenus" / "prompt.md"), "content": "x"},
            "prompts are Caesar's",
        ),
        (
            "Write",
            {"file_path": str(castra / "edicta" / "x.xml"), "content": "x"},
            "edicta change only",
        ),
        (
            "Write",
            {
                "file_path": str(castra / "centuriones" / "vorenus" / "commentarii" / "x.xml"),
                "content": "x",
            },
            "append-only",
        ),
        ("Read", {"file_path": str(castra / "legatus" / "prompt.md")}, "the Legatus's folder"),
        (
            "Read",
            {"file_path": str(castra.parent / "legio.toml")},
            "configuration is not for agents",
        ),
        ("Grep", {"pattern": "caesar", "path": str(castra)}, "contains Legio's castra"),
        ("Glob", {"pattern": "**/*", "path": "/"}, "contains Legio's castra"),
    ]
    for tool, args, expected in cases:
        text = await use(legatus, tool, args)
        assert DENIED.format(tool=tool) in text, (tool, args, text)
        assert expected in text, (tool, args, text)
    link = castra / "centuriones" / "vorenus" / "workspace" / "innocent.txt"
    link.symlink_to(castra / "praetorium.db")
    text = await use(legatus, "Read", {"file_path": str(link)})
    assert "the praetorium" in text
    denials = [r.getMessage() for r in caplog.records if r.getMessage().startswith("denied ")]
    assert denials[0].startswith(f"denied Read for vorenus on {castra / 'praetorium.db-wal'}: ")


async def test_reading_its_own_notes_and_shared_memoria_is_allowed(
    legatus: Legatus, castra_dir: Path
) -> None:
    store = MemoriaStore(castra_dir)
    store.publish_actum("stack", "Stack", "Python and SQLite", "pullo")
    mine = store.write_commentarium("vorenus", "Mine", "my own note", "vorenus")
    text = await use(legatus, "Read", {"file_path": str(castra_dir / "acta" / "stack.xml")})
    assert "Python and SQLite" in text
    text = await use(legatus, "Read", {"file_path": f"../commentarii/{mine.name}.xml"})
    assert "my own note" in text


async def test_tools_outside_the_agents_set_do_not_exist(legatus: Legatus) -> None:
    text = await use(legatus, "Bash", {"command": "echo hi"}, who="pullo")
    assert text == "TOOL_RESULT: No such tool available: Bash"


async def test_memoria_tools_stay_usable_beside_the_guard(legatus: Legatus) -> None:
    [reply] = await legatus.handle_message("@vorenus CALL_TOOL memoria_vorenus list_acta {}")
    assert reply.text.endswith("TOOL_RESULT: No acta yet.")


@pytest.mark.parametrize(
    ("agent", "path", "write", "allowed"),
    [
        ("vorenus", "centuriones/vorenus/workspace/a.txt", True, True),
        ("vorenus", "centuriones/vorenus/commentarii/n.xml", False, True),
        ("vorenus", "centuriones/vorenus/commentarii/n.xml", True, False),
        ("vorenus", "centuriones/pullo/workspace/a.txt", False, False),
        ("vorenus", "acta/a.xml", False, True),
        ("vorenus", "acta/a.xml", True, False),
        ("vorenus", "praetorium.db-shm", False, False),
        ("legatus", "centuriones/pullo/commentarii/n.xml", False, True),
        ("legatus", "centuriones/pullo/commentarii/n.xml", True, False),
        ("legatus", "praetorium.db", False, False),
        ("legatus", "legatus/workspace/plan.md", True, True),
        ("legatus", "legio.lock", False, False),
        ("vorenus", "attachments/ab12.png", False, False),
        ("legatus", "attachments/ab12.png", False, True),
        ("legatus", "attachments/ab12.png", True, False),
        ("vorenus", "centuriones/vorenus/workspace/inbox/1-a.png", False, True),
    ],
)
def test_guard_rules(castra_dir: Path, agent: str, path: str, write: bool, allowed: bool) -> None:
    guard = PathGuard(Castra(castra_dir), agent, castra_dir.parent / "legio.toml")
    reason = guard.check_path(castra_dir / path, write=write)
    assert (reason is None) == allowed, reason


def test_guard_lists_what_is_protected(castra_dir: Path) -> None:
    items = PathGuard(Castra(castra_dir), "vorenus", None).protected()
    assert any("praetorium.db* (no access)" in i for i in items)
    assert any("<other centuriones>" in i for i in items)


def test_workspace_is_created_and_is_the_default_cwd(castra_dir: Path) -> None:
    from legio.policy import working_dir

    castra = Castra(castra_dir)
    path = working_dir(castra, castra.read_centurio("pullo"))
    assert path == (castra_dir / "centuriones" / "pullo" / "workspace").resolve()
    assert path.is_dir()
    assert os.access(path, os.W_OK)
