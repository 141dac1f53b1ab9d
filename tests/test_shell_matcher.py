"""The approval matcher reads commands with a shell grammar and fails closed: every way a
tricked agent dodged a word list asks under ``Bash(git push:*)``, ordinary work does not,
and a grant of a command that cannot be read word by word covers exactly that command."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from legio.config import load_config
from legio.request import Decision
from legio.sessions.gatekeeper import Gatekeeper
from legio.shell import gitwords
from legio.shell import reader as shell
from legio.shell.reader import read
from legio.shell.rules import Rule, opaque_reason
from legio.store.grants import ApprovalStore
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
# "Keys out of reach": each of these pushed, or ran a command of the line's choosing,
# with no question under `Bash(git push:*)`
GIT_DOORS = [
    # pushing under another name
    "git send-pack origin HEAD:refs/heads/x",
    "git-send-pack origin HEAD:refs/heads/x",
    "/usr/lib/git-core/git-send-pack origin HEAD:refs/heads/x",
    "\\git send-pack origin HEAD",
    "command git send-pack origin HEAD",
    "sh -c 'git send-pack origin HEAD'",
    "find . -maxdepth 0 -exec git send-pack origin HEAD \\;",
    "git http-push https://example.com/r.git main",
    "git receive-pack .",
    "git remote-http origin https://example.com/r.git",
    "git-remote-https origin https://example.com/r.git",
    "git remote-ext origin 'sh -c x'",
    "git subtree push -P lib origin main",
    "git for-each-repo --config=maintenance.repo push",
    # an option whose value is a command git runs
    'git difftool -y -x "sh -c x"',
    'git difftool -yx "sh -c x"',
    'git difftool -y --extcmd="sh -c x"',
    'git difftool -y --ext "sh -c x"',
    "git difftool -t mytool",
    'git grep -O"sh -c x" pattern',
    'git grep -iO"sh -c x" pattern',
    'git grep --open-files-in-pager="sh -c x" pattern',
    'git grep --open="sh -c x" pattern',
    'git ls-remote --upload-pack="sh -c x" .',
    'git ls-remote --upload-p="sh -c x" .',
    'git ls-remote --exec="sh -c x" .',
    'git fetch --upload-pack="sh -c x" .',
    'git fetch --upload-pack "sh -c x" .',
    'git pull --upload-pa="sh -c x" .',
    'git clone -u "sh -c x" . copy',
    "git clone --template=/tmp/t . copy",
    "git clone -c core.fsmonitor=x . copy",
    'git archive --remote=. --exec="sh -c x" HEAD',
    'git push --receive-pack="sh -c x" .',
    'git send-pack --exec="sh -c x" . HEAD',
    "git filter-branch --env-filter 'sh -c x' HEAD",
    "git filter-branch --setup 'sh -c x' HEAD",
    "git instaweb --httpd='sh -c x'",
    "git mergetool --tool=mytool",
    "git daemon --access-hook=/tmp/x",
    "git rebase -ix 'git push' main",
    "git rebase --exe 'git push' main",
    "git fetch 'ext::sh -c x' main",
    "git fetch $OPTS .",
    "git rebase $OPTS main",
    "git --exec-path=/tmp/x fetch https://example.com/r.git",
    "git submodule--helper foreach 'git push'",
    # configuration, hooks and programs chosen by the line
    "XDG_CONFIG_HOME=$TMPDIR/x git status",
    "HOME=$TMPDIR/h git status",
    "env HOME=/tmp/h git status",
    "export HOME=/tmp/h; git status",
    "HOME=/tmp/h; git status",
    'export "HOME=/tmp/h"; git status',
    "read HOME <<< /tmp/h; git status",
    "printf -v HOME %s /tmp/h; git status",
    "declare -n r=HOME; r=/tmp/h; git status",
    ": ${XDG_CONFIG_HOME:=/tmp/x}; git status",
    ": $((HOME=5)); git status",
    "let HOME=5; git status",
    "HOME=/tmp/h bash -c 'git status'",
    "GIT_CONFIG_GLOBAL=/tmp/g git status",
    "GIT_DIR=/tmp/x/.git git status",
    "GIT_COMMON_DIR=/tmp/x git status",
    "GIT_INDEX_FILE=/tmp/i git status",
    "GIT_OBJECT_DIRECTORY=/tmp/o git status",
    "GIT_PROXY_COMMAND=/tmp/p git fetch git://example.com/r",
    "PATH=/tmp/p:$PATH git fetch",
    "git --git-dir=/tmp/x/.git status",
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
    "git rebase -x 'make test' main",
    "git grep -n -e push -- src",
    "git clone https://example.com/r.git copy",
    "git fetch origin main",
    "LC_ALL=C GIT_AUTHOR_NAME=x git commit -m done",
    "sha=$(git rev-parse HEAD) && git show $sha",
    "git difftool --tool-help",
]


@pytest.mark.parametrize("command", DODGES)
def test_every_dodge_of_the_word_list_asks(command: str) -> None:
    assert PUSH.matches("Bash", {"command": command}), read(command)


@pytest.mark.parametrize("command", GIT_DOORS)
def test_git_doors_ask_pushing_by_another_name_or_running_what_the_line_chose(
    command: str,
) -> None:
    assert PUSH.matches("Bash", {"command": command}), read(command)


PUSH_BY_ANOTHER_NAME = [
    "git send-pack origin HEAD:refs/heads/x",
    "/usr/lib/git-core/git-send-pack origin HEAD",
    "git http-push https://example.com/r.git main",
    "git receive-pack .",
    "git-remote-https origin https://example.com/r.git",
    "git subtree push -P lib origin main",
]


@pytest.mark.parametrize("command", PUSH_BY_ANOTHER_NAME)
def test_a_push_by_another_name_reads_as_a_push_to_anywhere(command: str) -> None:
    """Not opaque (the installed git has these commands): read as `git push` and any
    words, so every `git push` rule asks, `Bash(git push --force:*)` included."""
    reading = read(command)
    assert reading.opaque == "" and ("git", "push", None) in reading.commands
    assert Rule.parse("Bash(git push --force:*)").matches("Bash", {"command": command})


def test_git_running_a_command_asks_under_every_rule_and_says_why() -> None:
    publish = Rule.parse("Bash(npm publish:*)")
    assert publish.matches("Bash", {"command": "git push --receive-pack='npm publish' ."})
    assert "address is a command" in read("git remote-ext origin 'sh -c x'").opaque
    assert "internals" in read("git submodule--helper foreach 'git push'").opaque
    assert "value is a command" in read("git grep -iO'sh -c x' p").opaque


def test_a_git_command_the_installed_git_lacks_is_an_alias_and_opaque(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git's commands come from the installed git, asked once with no configuration of
    the daemon's user (so none of its aliases counts); without git, the built-in list."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    env_program = shutil.which("env")
    script = f'{env_program} > {tmp_path}/env\necho "$@" >> {tmp_path}/argv\necho push status\n'
    fake.write_text("#!/bin/sh\n" + script)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(gitwords, "_installed", None)
    shell._read_cached.cache_clear()
    line = "XDG_CONFIG_HOME=$TMPDIR/x git svn"
    assert PUSH.matches("Bash", {"command": "git svn dcommit"})
    assert "git svn" in read("git svn rebase").opaque
    assert "XDG_CONFIG_HOME" in read(line).opaque
    assert read("git status").opaque == ""
    assert gitwords.git_commands() == {"push", "status"}
    assert (tmp_path / "argv").read_text() == "--list-cmds=builtins,main,others\n"  # once
    env = dict(v.split("=", 1) for v in (tmp_path / "env").read_text().splitlines())
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_CONFIG_GLOBAL"] == "/dev/null"
    assert "legio-git-" in env["HOME"] and not os.path.exists(env["HOME"])  # a fresh, empty one
    assert "XDG_CONFIG_HOME" not in env

    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    monkeypatch.setattr(gitwords, "_installed", None)
    shell._read_cached.cache_clear()
    assert gitwords.git_commands() == gitwords.STATIC_GIT_COMMANDS
    assert read("git status").opaque == ""
    assert read("git pushx").opaque
    shell._read_cached.cache_clear()


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
    from legio.fence.guard import PathGuard, path_guard_hook

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


# an unknown program in front of git: each pushed with no question (attacker's pass)
STARTED_BY_ANOTHER_PROGRAM = [
    "setarch x86_64 git push /srv/bare.git HEAD:refs/heads/x",
    "/lib64/ld-linux-x86-64.so.2 /usr/bin/git push /srv/bare.git HEAD:refs/heads/x",
    "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 /usr/bin/git push /srv/b.git",
    "prlimit --nofile=200 git push /srv/bare.git HEAD:refs/heads/x",
    "linux64 git push /srv/b.git",
    "unshare -r git push /srv/b.git",
    "strace -f -o /dev/null git push /srv/b.git",
    "fakeroot git push /srv/b.git",
    "ssh-agent git push /srv/b.git",
    "setpriv --reuid=1000 git push /srv/b.git",
    "nsenter -t 1 -m git push /srv/b.git",
    "chroot / git push /srv/b.git",
    "valgrind -q git push /srv/b.git",
    "gdb --args git push /srv/b.git",
    "ltrace -f git push /srv/b.git",
    "catchsegv git push /srv/b.git",
    "dbus-run-session git push /srv/b.git",
    "make --eval='x:;git push /srv/b.git' x",
    "make -E 'x:;git push /srv/b.git' x",
    "setarch x86_64 /usr/lib/git-core/git-push /srv/b.git",
    "setarch x86_64 git -C repo push",
    "setarch x86_64 sh -c 'git push'",
    "G=git; setarch x86_64 $G push",
    "setarch x86_64 eval git push",
    "HOME=/srv/h setarch x86_64 git status",
]


@pytest.mark.parametrize("command", STARTED_BY_ANOTHER_PROGRAM)
def test_a_push_started_by_a_program_the_reader_does_not_know_asks(command: str) -> None:
    assert PUSH.matches("Bash", {"command": command}), read(command)


def test_the_loader_and_make_eval_are_opaque_and_data_programs_are_not_read_further() -> None:
    assert "loader" in read("/lib64/ld-linux-x86-64.so.2 /bin/true").opaque
    assert "--eval" in read("make --eval='x:;true' x").opaque
    assert read("make -C src test").opaque == ""
    assert not PUSH.matches("Bash", {"command": "echo git push"})
    assert not PUSH.matches("Bash", {"command": "setarch x86_64 git status"})
    assert not PUSH.matches("Bash", {"command": "prlimit --nofile=200 pytest -q"})


@pytest.mark.parametrize(
    "command",
    [
        "sudo GIT_DIR=/x git push /srv/bare.git",
        "sudo HOME=/srv/h git status",
        "doas GIT_SSH_COMMAND=x git fetch",
        "sudo -u legio HOME=/srv/h git status",
    ],
)
def test_sudo_setting_variables_is_read_as_env_reads_them(command: str) -> None:
    reading = read(command)
    assert reading.opaque, reading
    assert PUSH.matches("Bash", {"command": command})
    assert read("sudo -u legio A=1 git push").commands == (("git", "push"),)
    assert read("sudo A=1 git status").commands == (("git", "status"),)


@pytest.mark.parametrize(
    "command",
    [
        "sed -n '1e git push' /etc/hostname",
        "sed -e 's/.*/git push/e' f",
        "tar -xf t.tar --to-command='git push'",
        "tar -I 'sh -c \"git push\"' -xf a.tar",
        "rsync --rsh='git push' a b:c",
        "ssh -o ProxyCommand='git push' x",
        "man -P 'git push' ls",
        "vim -c '!git push' x",
        "emacs --batch --eval '(shell-command \"git push\")'",
        "sg x -c 'git push'",
        "expect -c 'spawn git push'",
        "script -q --command='git push' /dev/null",
        "env -vS'git push'",
        "env -iS'git push'",
        "MANPAGER='git push' man ls",
        "SYSTEMD_PAGER='git push' systemctl status",
        "git config core.fsmonitor 'git push' && git status",
        "git config core.pager 'git push #' && git log",
        "git config core.hooksPath /tmp/h && git commit -m x",
    ],
)
def test_a_push_handed_over_as_a_string_or_planted_in_git_config_asks(command: str) -> None:
    """A third attacker's pass: a program that runs a string it is given (sed's e, tar's
    --to-command, ssh's ProxyCommand, an editor's !), env -S in a cluster, a pager
    variable, and a git config write that a later git obeys."""
    assert PUSH.matches("Bash", {"command": command}), read(command)


def test_a_string_naming_git_given_to_a_data_program_is_still_data() -> None:
    for command in ("echo 'git push'", "grep -r 'git push' docs", "git config user.name x"):
        assert not PUSH.matches("Bash", {"command": command}), command
