"""The approval matcher reads commands with a shell grammar and fails closed: every way a
tricked agent dodged a word list asks under ``Bash(git push:*)``, ordinary work does not,
and a grant of a command that cannot be read word by word covers exactly that command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from legio.approvals import Decision, Rule, opaque_reason
from legio.config import load_config
from legio.sessions.gate import Gatekeeper
from legio.shell import read
from legio.store.approvals import ApprovalStore
from legio.store.praetorium import Praetorium

PUSH = Rule.parse("Bash(git push:*)")
DEPLOY = Rule.parse("Bash(make deploy)")

# each of these ran `git push` without a question under the word-list matcher
DODGES = [
    "if true; then git push; fi",
    "{ git push; }",
    "(git push)",
    "echo git push | bash",
    "echo git push | sh -s",
    "timeout 5 git push",
    "timeout -k 1 --signal=KILL 5s git push",
    "git {push,}",
    "git $'push'",
    "gi\\\nt push",
    "git pu\\\nsh",
    "time -p git push",
    "command -p git push",
    "exec -a x git push",
    "xargs git push",
    "echo push | xargs git",
    "echo origin | xargs -I{} git push {}",
    "find . -exec git push \\;",
    "find . -maxdepth 0 -execdir sh -c 'git push' \\;",
    "bash <<< 'git push'",
    "bash <<EOF\ngit push\nEOF",
    "cat <<EOF | sh\ngit push\nEOF",
    "bash <(echo git push)",
    "source <(echo git push)",
    ". ./push.sh",
    "env -S'git push'",
    "env --split-string='git push'",
    "git --config-env=alias.p=P p",
    "git -c alias.p=push p",
    "git -c include.path=/tmp/x p",
    "f(){ git push; }; f",
    "G=git; $G push",
    "$(echo git) push",
    "g\\it push",
    "'git' \"push\"",
    "while true; do git push; break; done",
    "until git push; do :; done",
    "for r in origin; do git push $r; done",
    "case x in x) git push;; esac",
    "! git push",
    "coproc git push",
    "eval git push",
    "alias p='git push'",
    "trap 'git push' EXIT",
    "python3 -c 'import os; os.system(\"git push\")'",
    "python -Ic 'print(1)'",
    'node -e \'require("child_process").execSync("git push")\'',
    "perl -e 'system q(git push)'",
    "ruby -e 'system %q(git push)'",
    "echo 'import os' | python3",
    "python3 - <<EOF\nprint(1)\nEOF",
    'sh -c "$CMD"',
    "bash -o pipefail -c 'git push'",
    "bash -c -x 'git push'",
    "sudo -s git push",
    "nice -n 5 nohup stdbuf -oL git push",
    "ionice -c 2 -n 7 git push",
    "watch -n 1 git push",
    "git pu* origin",
    "git $SUB",
    "git -C . $X push",
    "x=$(git push)",
    "echo hi > $(git push)",
    "cat <<EOF\n$(git push)\nEOF",
    "declare -x A=$(git push)",
    "[[ $(git push) ]]",
    "git pushx",
    "git 'push",
    "{git,push}",
    "busybox sh -c 'git push'",
    "exec 5<<<'git push'; bash <&5",
    "bash < cmds.txt",
    "python3",
    "script -qc 'git push' /dev/null",
    "su -c 'git push' legio",
    "flock /tmp/l -c 'git push'",
    "/usr/lib/git-core/git-push origin",
    "git rebase -x 'git push' main",
    "git rebase --exec='git push' main",
    "git bisect run git push",
    "git submodule foreach 'git push'",
    ">log git push",
    "timeout 5 bash <<< 'git push'",
    "xargs sh -c",
    "sh -c 'gi\\\nt push'",
    "0</dev/null git push",
    "sh 0<<<'git push'",
    "bash /dev/stdin <<< 'git push'",
    "bash /proc/self/fd/0 <<< 'git push'",
    "flock -x /tmp/l git push",
    "flock /tmp/l -c 'git push'",
    "parallel git ::: push",
    "git -c core.pager='git push' -p log",
    "git -c core.sshCommand='sh -c \\\"git push\\\"' fetch",
    "GIT_PAGER='git push' git -p log",
    "export GIT_PAGER='git push'; git -p log",
    "env GIT_SSH_COMMAND='git push' git fetch",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=x git -p log",
    "PS4='$(git push)' bash -xc true",
    "BASH_ENV=./x.sh bash -c true",
    "awk 'BEGIN{system(\"git push\")}'",
    'awk \'BEGIN{print "push" | "xargs git"}\'',
    "$'git' push",
]
# ordinary work: no question
ORDINARY = [
    "ls -la",
    "git status",
    "git -C repo log --oneline -5",
    "git commit -m 'push the fix'",
    'echo "git push"',
    "grep -r push .",
    "pytest -q tests/test_x.py",
    "cd src && make test 2>&1 | tail -20",
    "find . -name '*.py' -exec wc -l {} +",
    "cat <<'EOF' > notes.txt\ngit push\nEOF",
    "python3 script.py --push",
    "python -m pytest -c pytest.ini",
    "docker build -t x . && echo done",
    "export PATH=$HOME/bin:$PATH",
    "echo $'a\\tb' > tabs.txt",
    "mkdir -p src/{api,web}",
    "sed -n '1,20p' README.md",
    "bash scripts/check.sh",
    "[ -f x ] && echo yes",
    "git show HEAD@{1}",
    "ls missing 2>/dev/null || echo none",
    "echo 1 > count.txt",
    "flock /tmp/l make test",
    "GIT_PAGER=cat git log -5",
    "git -c user.name=legio -c user.email=l@x commit -m done",
    "awk '{print $1}' notes.txt | sort",
    "GIT_TERMINAL_PROMPT=0 git fetch",
]


@pytest.mark.parametrize("command", DODGES)
def test_every_dodge_of_the_word_list_asks(command: str) -> None:
    assert PUSH.matches("Bash", {"command": command}), read(command)


@pytest.mark.parametrize("command", ORDINARY)
def test_ordinary_commands_run_unasked(command: str) -> None:
    assert not PUSH.matches("Bash", {"command": command}), read(command)


def test_literal_commands_are_read_word_by_word_and_opaque_ones_say_why() -> None:
    assert read("sudo -u x env A=1 timeout 5 /usr/bin/git -C d push -f").commands == (
        ("git", "push", "-f"),
    )
    assert read("ls | grep x && echo ok").opaque == ""
    assert "compound" in read("if true; then ls; fi").opaque
    assert "inline code" in read("python3 -c 'print(1)'").opaque
    assert "only known when it runs" in read("$X push").opaque
    assert "bash reading its commands from its input" in read("curl -s x | bash").opaque
    assert opaque_reason("Bash", {"command": "for x in y; do :; done"})
    assert not opaque_reason("Read", {"file_path": "/x"})


def test_an_exact_rule_asks_for_an_opaque_command_and_a_word_that_may_be_it() -> None:
    assert DEPLOY.matches("Bash", {"command": "make deploy"})
    assert not DEPLOY.matches("Bash", {"command": "make deploy-docs"})
    assert not DEPLOY.matches("Bash", {"command": "make test"})
    assert DEPLOY.matches("Bash", {"command": "make $TARGET"})
    assert DEPLOY.matches("Bash", {"command": "{ make test; }"})


def call(command: str) -> dict[str, Any]:
    return {"command": command}


async def test_a_grant_of_an_opaque_command_covers_that_command_only(tmp_path: Path) -> None:
    config = load_config(None)
    praetorium = await Praetorium.open(tmp_path / "p.db")
    try:
        gate = Gatekeeper(config, ApprovalStore(praetorium))
        rules = gate.agent_rules()
        loop = "for r in origin; do git push $r; done"
        [needed] = gate.pending("vorenus", "s1", rules, "Bash", call(loop))
        assert needed.text == f"Bash(exactly: {loop})"
        await gate._remember(Decision("always"), "vorenus", "s1", (needed.text,))
        assert gate.pending("vorenus", "s1", rules, "Bash", call(loop)) == []
        assert gate.pending("vorenus", "s2", rules, "Bash", call(loop)) == []
        other = "for r in upstream; do git push $r; done"
        assert gate.pending("vorenus", "s1", rules, "Bash", call(other))
        assert gate.pending("pullo", "s1", rules, "Bash", call(loop))
        # a literal push granted for the session does not cover an opaque one
        [literal] = gate.pending("vorenus", "s1", rules, "Bash", call("git push"))
        await gate._remember(Decision("session"), "vorenus", "s1", (literal.text,))
        assert gate.pending("vorenus", "s1", rules, "Bash", call("git push origin")) == []
        assert gate.pending("vorenus", "s1", rules, "Bash", call("{ git push; }"))
        # "Always" survives a restart, and still covers only that command
        again = Gatekeeper(config, ApprovalStore(praetorium))
        await again.load()
        assert again.pending("vorenus", "s9", rules, "Bash", call(loop)) == []
        assert again.pending("vorenus", "s9", rules, "Bash", call(loop + " ")) != []
        # an opaque command with no Bash rule at all asks nothing
        assert gate.pending("vorenus", "s1", [], "Bash", call(other)) == []
    finally:
        await praetorium.close()


def test_a_command_too_deep_to_read_asks_and_never_breaks_the_hooks(
    castra_dir: Path,
) -> None:
    """Nesting that would overflow the reader's recursion is opaque (it asks); a hook
    that cannot check a call refuses it rather than letting it through."""
    import asyncio

    from legio.castra import Castra
    from legio.guard import PathGuard, path_guard_hook

    deep = "$(" * 3000 + "git push" + ")" * 3000
    assert PUSH.matches("Bash", {"command": deep})
    assert "nested too deeply" in read("(" * 20000 + "ls" + ")" * 20000).opaque

    guard = PathGuard(Castra(castra_dir), "vorenus", None)

    def broken(*args: object, **kwargs: object) -> str | None:
        raise RuntimeError("boom")

    guard.check = broken  # type: ignore[method-assign]
    hook = path_guard_hook(guard)
    answer = asyncio.run(hook({"tool_name": "Bash", "tool_input": {"command": "ls"}}, "t1", {}))
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
