"""``legio check``'s forge lines against the fake forge: the token and each project's
repository verified with one read each, what is wrong named (no token, 401, 404)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from legio.config import Config, load_config
from legio.forge.checkup import check_forge
from tests.fakes.fake_forge import FakeForge
from tests.gitrepo import make_project

TOKEN = "ghp_check_token_1"


@pytest.fixture
async def forge() -> AsyncIterator[FakeForge]:
    async with FakeForge(TOKEN) as server:
        server.add_repo("caesar/app")
        yield server


def config_with(castra_dir: Path, forge: FakeForge, projects: str) -> Config:
    path = castra_dir.parent / "legio.toml"
    path.write_text(f'[forge]\napi_url = "{forge.api_url}"\n\n{projects}')
    return load_config(path)


async def test_all_good_then_each_problem_named(
    forge: FakeForge, castra_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_project(tmp_path / "app")  # its remote: https://example.invalid/caesar/app.git
    other = make_project(tmp_path / "other")
    config = config_with(
        castra_dir,
        forge,
        f'[projects.app]\npath = "{app}"\n\n[projects.other]\npath = "{other}"\n'
        'repo = "caesar/other"\n',
    )
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    lines = await check_forge(config)
    assert lines[0] == ("ok", f"forge: {forge.api_url}, the token of caesar ($GITHUB_TOKEN)")
    assert lines[1][0] == "ok" and "caesar/app" in lines[1][1]  # read from the remote's URL
    assert lines[2][0] == "bad" and "caesar/other: Not Found (no such repository" in lines[2][1]
    assert len(forge.calls) == 3  # one read each

    monkeypatch.setenv("GITHUB_TOKEN", "not-the-token")
    [line] = await check_forge(config)
    assert line[0] == "bad" and "Bad credentials (a wrong or expired token?)" in line[1]
    assert "not-the-token" not in line[1]


async def test_no_token_names_the_variable(
    forge: FakeForge, castra_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    from legio.fence import vault

    monkeypatch.setattr(vault, "_KEPT", {})
    [line] = await check_forge(config_with(castra_dir, forge, ""))
    assert line[0] == "bad" and "$GITHUB_TOKEN is not set" in line[1]
    assert forge.calls == []
