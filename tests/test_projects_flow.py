"""Projects through the engine (fake CLI, real git): a #name puts a request on a project, the
agent's CLI runs in its copy and is told where it is, answers and history say #project,
an unknown #name runs nothing, the Legatus dispatches onto a project, /diff /projects
/drop answer through the admin commands."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from legio.app import LegioApp
from legio.frontends.admin import Admin
from legio.legatus.scheduling import job_runner
from legio.request import Callbacks, Reply
from tests.conftest import FakeCli
from tests.gitrepo import git, make_project
from tests.legion import fake_cli_config, processes_of, rendered


@pytest.fixture
async def project_app(
    castra_dir: Path, fake_cli: FakeCli, tmp_path: Path
) -> AsyncIterator[tuple[LegioApp, Path]]:
    project = make_project(tmp_path / "app")
    config = fake_cli_config(castra_dir, fake_cli, f'[projects.app]\npath = "{project}"\n')
    opened = await LegioApp.open(config)
    yield opened, project
    await opened.close()


async def test_a_hashtag_puts_the_request_on_the_project_in_the_agents_copy(
    project_app: tuple[LegioApp, Path], fake_cli: FakeCli, castra_dir: Path
) -> None:
    app, _ = project_app
    [reply] = await app.handle_message("@vorenus #app fix the failing test")
    assert reply.project == "app" and rendered(app, reply).startswith("⚔️ vorenus #app — ")
    copy = (castra_dir / "centuriones" / "vorenus" / "projects" / "app").resolve()
    [process] = processes_of(fake_cli, "vorenus")
    assert Path(process.cwd).resolve() == copy  # relative paths and commands start there
    raw = process.raw_prompts[-1]
    assert 'project="app"' in raw and 'branch="legio/vorenus/main"' in raw
    assert 'base="main"' in raw
    assert git(copy, "rev-parse", "--abbrev-ref", "HEAD").strip() == "legio/vorenus/main"
    caesar, answer = reversed(await app.engine.praetorium.get_history(2))
    assert (caesar.project, answer.project) == ("app", "app")
    pages = await Admin(app).run("/history 2")
    assert "vorenus → caesar #app: ECHO" in pages[0]

    # the next request without a #name: back in its workspace (the CLI restarts, resumed)
    [reply] = await app.handle_message("@vorenus and now something else")
    assert reply.project is None and not rendered(app, reply).startswith("⚔️ vorenus #app")
    last = processes_of(fake_cli, "vorenus")[-1]
    assert Path(last.cwd).resolve() == (castra_dir / "centuriones" / "vorenus" / "workspace")
    assert last.resumed  # the same conversation, in its other place
    assert 'project="' not in last.raw_prompts[-1].split('current="true"')[-1]


async def test_an_unknown_hashtag_runs_nothing_and_lists_the_projects(
    project_app: tuple[LegioApp, Path], fake_cli: FakeCli
) -> None:
    app, _ = project_app
    [reply] = await app.handle_message("@vorenus #ap fix it")
    assert reply.kind == "notice"
    assert "#ap is not a project" in reply.text and "#app" in reply.text
    assert await app.engine.praetorium.get_history(5) == []
    assert fake_cli.processes() == []


async def test_the_legatus_dispatches_onto_a_project(
    project_app: tuple[LegioApp, Path], fake_cli: FakeCli
) -> None:
    app, _ = project_app
    call = '{"centuriones": ["pullo"], "text": "look at the tests", "project": "app"}'
    [reply] = await app.handle_message(f"CALL_TOOL legatus_tools dispatch {call}")
    assert "## pullo" in reply.text
    [process] = processes_of(fake_cli, "pullo")
    assert process.cwd.endswith("/centuriones/pullo/projects/app")
    stored = [n for n in await app.engine.praetorium.get_history(10) if n.sender == "legatus"]
    assert stored and stored[-1].project == "app"
    bad = '{"centuriones": ["pullo"], "text": "x", "project": "nope"}'
    [reply] = await app.handle_message(f"CALL_TOOL legatus_tools dispatch {bad}")
    assert "no project named 'nope'" in reply.text


async def test_diff_projects_and_drop(project_app: tuple[LegioApp, Path], castra_dir: Path) -> None:
    app, project = project_app
    admin = Admin(app)
    assert "vorenus has no copy of #app" in (await admin.run("/diff vorenus"))[0]
    await app.handle_message("@vorenus #app start")
    copy = castra_dir / "centuriones" / "vorenus" / "projects" / "app"
    (copy / "app.py").write_text("def add(a, b):\n    return a + b\n")
    git(copy, "commit", "--quiet", "-am", "fix add", caesar=False)

    pages = await admin.run("/diff")  # one project, one agent with a copy: no names needed
    assert "vorenus on #app: branch legio/vorenus/main, 1 commit ahead of main" in pages[0]
    assert "1 file changed, +1 −1" in pages[0] and "fix add" in pages[0]
    [(name, content)] = pages.documents  # type: ignore[attr-defined]
    assert name == "vorenus-app.diff" and b"+    return a + b" in content

    listing = (await admin.run("/projects"))[0]
    assert f"#app — {project} (base main)" in listing
    assert "vorenus: legio/vorenus/main, 1 ahead, last: fix add" in listing

    assert "is neither a centurio" in (await admin.run("/diff brutus"))[0]
    assert "#nope is not a project" in (await admin.run("/diff vorenus #nope"))[0]
    dropped = (await admin.run("/drop vorenus #app"))[0]
    assert "Dropped vorenus's copy of #app" in dropped
    assert not copy.exists()
    assert "nothing to drop" in (await admin.run("/drop vorenus app"))[0]


async def test_a_scheduled_job_on_a_project_runs_in_the_agents_copy(
    project_app: tuple[LegioApp, Path], fake_cli: FakeCli
) -> None:
    app, _ = project_app
    call = '{"request": "REPLY checked", "target": "vorenus", "in": "1h", "project": "#app"}'
    [reply] = await app.handle_message(f"CALL_TOOL legatus_tools schedule_job {call}")
    assert "Scheduled job #1" in reply.text
    job = await app.engine.scheduler.jobs.get(1)
    assert job is not None and job.request == "#app REPLY checked"
    bad = '{"request": "x", "target": "vorenus", "in": "1h", "project": "nope"}'
    [reply] = await app.handle_message(f"CALL_TOOL legatus_tools schedule_job {bad}")
    assert "no project named 'nope'" in reply.text

    nuntius = await app.engine.praetorium.post("scheduler", job.request, ["vorenus"])
    assert await job_runner(app.engine.legatus)(job, nuntius) == "answer"
    [process] = processes_of(fake_cli, "vorenus")
    assert process.cwd.endswith("/centuriones/vorenus/projects/app")
    answer = (await app.engine.praetorium.get_history(1))[0]
    assert (answer.sender, answer.project) == ("vorenus", "app")


async def test_a_project_that_is_gone_is_answered_clearly(
    project_app: tuple[LegioApp, Path], fake_cli: FakeCli, castra_dir: Path
) -> None:
    app, project = project_app
    leftover = castra_dir / "centuriones" / "vorenus" / "projects" / ".app.part-1234abcd"
    leftover.mkdir(parents=True)  # a clone a kill cut off
    [reply] = await app.handle_message("@vorenus #app hello")
    assert reply.kind == "answer" and not leftover.exists()
    project.rename(project.with_name("elsewhere"))
    [reply] = await app.handle_message("@pullo #app hello")
    assert reply.kind == "error"
    assert f"[pullo] cannot answer: #app: {project} is gone; fix [projects.app] path" in reply.text
    assert len(processes_of(fake_cli, "pullo")) == 0  # nothing ran


async def test_send_file_takes_a_file_of_the_copy(project_app: tuple[LegioApp, Path]) -> None:
    app, _ = project_app
    call = '{"path": "app.py", "caption": "the fix"}'
    [reply] = await app.handle_message(f"@vorenus #app\nCALL_TOOL memoria_vorenus send_file {call}")
    assert "Queued app.py" in reply.text
    assert [f.name for f in reply.files] == ["app.py"]
    assert b"def add" in reply.files[0].path.read_bytes()


async def test_an_answer_never_waits_for_its_branch_to_be_published(
    project_app: tuple[LegioApp, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # publishing held (a copy's git stalled, a slow disk): the answer goes out all the same
    app, _ = project_app
    hold = tmp_path / "hold"
    hold.mkdir()
    monkeypatch.setenv("FAKE_CLAUDE_HOLD", str(hold))  # the CLI waits before answering
    monkeypatch.setenv("FAKE_CLAUDE_HOLD_AT", "turn")
    shown = asyncio.Event()

    async def on_reply(reply: Reply) -> None:
        shown.set()

    turn = asyncio.create_task(
        app.handle_message("@vorenus #app REPLY done", Callbacks(on_reply=on_reply))
    )
    for _ in range(6000):  # its copy made, its CLI has the query and waits to answer it
        if any(hold.glob("at-turn-*")):
            break
        await asyncio.sleep(0.01)
    publishing = app.engine.sessions.projects._locks["vorenus", "app"]  # its copy's publishing
    await publishing.acquire()
    (hold / "go-turn").touch()
    try:
        await asyncio.wait_for(shown.wait(), 30)  # delivered while publishing waits
        assert not turn.done()  # the turn itself ends once its branch is published
    finally:
        publishing.release()
    [reply] = await asyncio.wait_for(turn, 30)
    assert reply.text.endswith("done")
