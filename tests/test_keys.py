"""Keys out of reach: every credential store of the user (there or not) gets its own deny
rule and a guard refusal; agents' socket variables never reach a CLI; ``[sandbox] hide``;
``legio check`` lists what is hidden and warns about readable key-like files."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from legio.castra import Castra
from legio.config import load_config
from legio.errors import ConfigError
from legio.fence.guard import PathGuard
from legio.fence.keys import SOCKETS_NOTE
from legio.fence.keyscan import exposed_keys, looks_like_key
from legio.fence.policy import (
    denied_env_names,
    deny_rules,
    hidden_now,
    protected_entries,
    scrub_environment,
)
from legio.fence.sandbox import keys_report


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr("legio.fence.keys.account_home", lambda: Path("/nonexistent-account-home"))
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "PASSWORD_STORE_DIR"):
        monkeypatch.delenv(var, raising=False)
    for var in ("KUBECONFIG", "CARGO_HOME", "GRADLE_USER_HOME", "HISTFILE", "GIT_CONFIG_GLOBAL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")  # /etc/gitconfig is the machine's
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    return home.resolve()


def test_every_key_store_gets_its_own_rule_and_the_guard_refuses_it(
    castra_dir: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also in the account's home of the password database, where ssh looks whatever
    ``$HOME`` says."""
    xdg, store, kube = tmp_path / "xdg", tmp_path / "pass", tmp_path / "kube"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    monkeypatch.setenv("PASSWORD_STORE_DIR", str(store))
    monkeypatch.setenv("KUBECONFIG", f"{kube}/a.yaml{os.pathsep}{kube}/b.yaml")
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("KEY")
    (home / ".git-credentials").write_text("https://u:t@github.com")
    castra = Castra(castra_dir)
    for agent in ("vorenus", "legatus"):
        rules = deny_rules(protected_entries(castra, agent, None))
        folders = [".ssh", ".config/gh", ".aws", ".config/gcloud", ".kube", ".gnupg"]
        folders += [".local/share/keyrings", ".password-store"]
        for rel in folders:  # there or not: the CLI masks what exists when a command starts
            assert f"Read(/{home / rel}/**)" in rules, rel
        for rel in (".git-credentials", ".config/git/credentials", ".netrc", ".npmrc"):
            assert f"Read(/{home / rel})" in rules, rel
        for rel in (".pypirc", ".docker/config.json"):
            assert f"Read(/{home / rel})" in rules, rel
        for path in (xdg / "gh", xdg / "gcloud", store):
            assert f"Read(/{path}/**)" in rules, path
        assert f"Read(/{xdg / 'git' / 'credentials'})" in rules
        assert f"Read(/{kube}/a.yaml)" in rules and f"Read(/{kube}/b.yaml)" in rules
        assert not any("*" in rule.replace("/**)", ")") for rule in rules)  # no glob
        assert "Read(//nonexistent-account-home/.ssh/**)" in rules

    workspace = castra_dir.resolve() / "centuriones" / "vorenus" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "key-link").symlink_to(home / ".ssh" / "id_rsa")
    guard = PathGuard(castra, "vorenus", None, workspace=workspace)
    for path in (
        home / ".ssh" / "id_rsa",
        home / ".ssh" / ".." / ".ssh" / "id_rsa",
        workspace / "key-link",
        home / ".netrc",  # not there yet
        xdg / "gh" / "hosts.yml",
        store / "github.gpg",
        kube / "b.yaml",
    ):
        assert guard.check_path(path, write=False), path
    assert guard.check("Grep", {"pattern": "x", "path": str(home / ".ssh")}, str(workspace))
    assert guard.check("Bash", {"command": f"cat {home}/.git-credentials"}, str(workspace))
    assert guard.check_path(home / "notes.txt", write=False) is None


def test_every_other_store_gets_its_own_rule_too(
    castra_dir: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Package registries' and containers' logins, git's config (tokens in ``insteadOf``
    URLs and ``http.extraheader``), cloud and database logins, shell histories, browser
    profiles: there or not, each by its own rule, also where a variable moves it."""
    xdg, cargo, gradle = tmp_path / "xdg", tmp_path / "cargo", tmp_path / "gradle"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    monkeypatch.setenv("CARGO_HOME", str(cargo))
    monkeypatch.setenv("GRADLE_USER_HOME", str(gradle))
    monkeypatch.setenv("HISTFILE", str(tmp_path / "hist"))
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(tmp_path / "auth.json"))
    rules = deny_rules(protected_entries(Castra(castra_dir), "vorenus", None))
    files = [".cargo/credentials.toml", ".cargo/credentials", ".config/containers/auth.json"]
    files += [".gitconfig", ".config/git/config", ".bash_history", ".zsh_history"]
    files += [".config/rclone/rclone.conf", ".pgpass", ".my.cnf", ".gem/credentials"]
    files += [".m2/settings.xml", ".gradle/gradle.properties", ".config/hub", ".vault-token"]
    files += [".terraform.d/credentials.tfrc.json", ".local/share/fish/fish_history"]
    for rel in files:
        assert f"Read(/{home / rel})" in rules and f"Edit(/{home / rel})" in rules, rel
    folders = [".config/glab-cli", ".azure", ".mozilla", ".config/google-chrome"]
    folders += [".config/chromium", ".local/share/keyrings", ".cache/git/credential"]
    for rel in folders:
        assert f"Read(/{home / rel}/**)" in rules, rel
    for path in (
        cargo / "credentials.toml",
        gradle / "gradle.properties",
        tmp_path / "hist",
        tmp_path / "auth.json",
        tmp_path / "run" / "containers" / "auth.json",
        xdg / "containers" / "auth.json",
        xdg / "git" / "config",
        xdg / "rclone" / "rclone.conf",
    ):
        assert f"Read(/{path})" in rules, path
    assert f"Read(/{xdg / 'google-chrome'}/**)" in rules
    assert f"Read(/{cargo})" not in rules and f"Read(/{cargo}/**)" not in rules  # builds work
    guard = PathGuard(Castra(castra_dir), "vorenus", None)
    assert guard.check_path(home / ".cargo" / "credentials.toml", write=False)
    assert guard.check("Bash", {"command": "cat ~/.bash_history"}, str(home))


def test_the_files_the_users_git_config_names_are_hidden(
    castra_dir: Path, home: Path, tmp_path: Path
) -> None:
    """``credential.helper = store --file <path>`` (also per URL, any spelling), a cache
    helper's ``--socket``, and every file ``include.path`` names: read by git from the
    user's own config (its includes not followed), read again when it changes."""
    elsewhere = tmp_path / "elsewhere"
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Caesar\n"
        "[credential]\n\thelper = store --file ~/tokens/git.txt\n"
        f'[credential "https://gitlab.com"]\n\thelper = "store --file={elsewhere}/gl"\n'
        f"[credential]\n\thelper = cache --socket {elsewhere}/sock\n"
        "\thelper = !f() { echo password=x; }; f\n"
        "[include]\n\tpath = .gitconfig.local\n"
    )
    (home / ".gitconfig.local").write_text("[credential]\n\thelper = store --file /never/read\n")
    before = hidden_now()
    rules = deny_rules(protected_entries(Castra(castra_dir), "vorenus", None))
    for path in (home / "tokens" / "git.txt", elsewhere / "gl", elsewhere / "sock"):
        assert f"Read(/{path})" in rules, path
    assert f"Read(/{home / '.gitconfig.local'})" in rules  # the user's config too
    assert "Read(//never/read)" not in rules  # an included file is not read
    guard = PathGuard(Castra(castra_dir), "vorenus", None)
    assert guard.check_path(home / "tokens" / "git.txt", write=False)

    (home / ".gitconfig").write_text("[credential]\n\thelper = store --file ~/other\n")
    assert hidden_now() != before  # sessions restart to hide the new one
    rules = deny_rules(protected_entries(Castra(castra_dir), "vorenus", None))
    assert f"Read(/{home / 'other'})" in rules
    assert f"Read(/{home / 'tokens' / 'git.txt'})" not in rules


def test_agent_sockets_never_reach_a_cli_and_their_folders_are_hidden(
    castra_dir: Path,
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    write_config: Callable[[str], Path],
) -> None:
    config = load_config(write_config("[claude]\nenv_deny = []\n"))
    env = {"SSH_AUTH_SOCK": "/x", "SSH_AGENT_PID": "1", "GPG_AGENT_INFO": "/g:1:1", "PATH": "/b"}
    assert denied_env_names(config, env) == ["GPG_AGENT_INFO", "SSH_AGENT_PID", "SSH_AUTH_SOCK"]

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    before = hidden_now()
    agent = tmp_path / "elsewhere" / "agent.sock"
    monkeypatch.setenv("SSH_AUTH_SOCK", str(agent))
    monkeypatch.setenv("GPG_AGENT_INFO", f"{tmp_path}/S.gpg-agent:42:1")
    monkeypatch.delenv(SOCKETS_NOTE, raising=False)
    scrub_environment(config)
    assert "SSH_AUTH_SOCK" not in os.environ and "GPG_AGENT_INFO" not in os.environ
    assert os.environ[SOCKETS_NOTE].split(os.pathsep) == [str(agent), f"{tmp_path}/S.gpg-agent"]
    (temp / "ssh-XyZ123").mkdir()  # an ssh-agent started later, in the temp folder
    rules = deny_rules(protected_entries(Castra(castra_dir), "vorenus", None))
    assert f"Read(/{agent})" in rules and f"Read(/{tmp_path}/S.gpg-agent)" in rules
    assert f"Read(/{temp.resolve() / 'ssh-XyZ123'}/**)" in rules
    assert hidden_now() != before  # sessions restart to hide the new one


def test_a_new_ssh_agent_folder_is_seen_though_the_temp_folder_was_listed_before(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temp folder's listing is reused between turns while it is unchanged: an
    ssh-agent started after it was listed is still hidden before the next turn."""
    temp = tmp_path / "temp"
    temp.mkdir()
    (temp / "unrelated").mkdir()
    settled = time.time_ns() - 10_000_000_000  # unchanged for 10 s
    os.utime(temp, ns=(settled, settled))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    before = hidden_now()
    assert hidden_now() == before
    (temp / "ssh-Later1").mkdir()
    assert str(temp / "ssh-Later1") in hidden_now()


def test_a_folder_made_in_the_same_clock_tick_as_the_listing_is_seen(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change that does not move the folder's mtime (the same clock tick as the last
    listing) is still seen: a listing taken within a second of a change is not reused."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    listed = os.stat(temp)
    hidden_now()
    (temp / "ssh-SameTick").mkdir()
    os.utime(temp, ns=(listed.st_atime_ns, listed.st_mtime_ns))  # as if in the same tick
    assert str(temp / "ssh-SameTick") in hidden_now()


def test_sandbox_hide_adds_paths_resolved_from_the_config_folder(
    castra_dir: Path, home: Path, tmp_path: Path, write_config: Callable[[str], Path]
) -> None:
    (home / "secrets").mkdir()
    (tmp_path / "vault.txt").write_text("s")
    config = load_config(write_config('[sandbox]\nhide = ["~/secrets", "vault.txt"]\n'))
    assert config.sandbox.hide == [str(home / "secrets"), str(tmp_path.resolve() / "vault.txt")]
    castra = Castra(config.castra)
    guard = PathGuard(castra, "vorenus", config.path, hide=config.sandbox.hide)
    assert guard.check_path(home / "secrets" / "a", write=False)
    assert guard.check_path(tmp_path / "vault.txt", write=False)
    from legio.fence.sandbox import agent_options

    rules = agent_options(castra, config, "vorenus", ["Read"])["settings"]
    assert f"Read(/{home / 'secrets'}/**)" in rules
    assert f"Read(/{tmp_path.resolve() / 'vault.txt'})" in rules
    for bad, why in (
        ('["~/absent"]', "does not exist"),
        ('["~/.ssh/*"]', "not paths"),
        (f'["{tmp_path}"]', "holds the castra"),
    ):
        with pytest.raises(ConfigError, match=why.replace("*", "")):
            load_config(write_config(f"[sandbox]\nhide = {bad}\n"))


def test_sandbox_check_read_is_resolved_and_never_the_castra(
    castra_dir: Path, home: Path, tmp_path: Path, write_config: Callable[[str], Path]
) -> None:
    (home / ".pyenv").mkdir()
    (tmp_path / "tools").mkdir()
    config = load_config(write_config('[sandbox]\ncheck_read = ["~/.pyenv", "tools"]\n'))
    assert config.sandbox.check_read == [str(home / ".pyenv"), str(tmp_path.resolve() / "tools")]
    for bad, why in (
        ('["~/absent"]', "does not exist"),
        ('["~/.cargo/*"]', "not paths"),
        ('["/"]', "holds or is in the castra"),
        (f'["{castra_dir / "centuriones"}"]', "holds or is in the castra"),
    ):
        with pytest.raises(ConfigError, match=why.replace("*", "")):
            load_config(write_config(f"[sandbox]\ncheck_read = {bad}\n"))


def test_check_lists_the_hidden_stores_and_warns_about_readable_keys(
    castra_dir: Path, home: Path, write_config: Callable[[str], Path]
) -> None:
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("hidden already")
    (home / ".git-credentials").write_text("t")
    for rel in ("work/deploy.pem", "work/api_token.txt", "a/b/.env", "old/id_rsa", "x.pub"):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text("k")
    (home / "a" / "b" / "c" / "d").mkdir(parents=True)
    (home / "a" / "b" / "c" / "d" / "deep.key").write_text("too deep to look")
    (home / "node_modules" / "x").mkdir(parents=True)
    (home / "node_modules" / "x" / "secret.json").write_text("skipped tree")
    config = load_config(write_config(""))
    lines = keys_report(config, Castra(config.castra))
    assert lines[0] == ("ok", f"hidden from agents (keys): {home}/.git-credentials, {home}/.ssh/")
    warned = [text.split(" ", 1)[0] for mark, text in lines if mark == "warn"]
    assert warned == [
        f"{home}/a/b/.env",
        f"{home}/old/id_rsa",
        f"{home}/work/api_token.txt",
        f"{home}/work/deploy.pem",
    ]
    assert "[sandbox] hide" in lines[1][1]
    assert not looks_like_key("id_rsa.pub") and looks_like_key("Credentials.json")


def test_check_walks_the_dot_folders_that_hold_stores(
    castra_dir: Path, home: Path, write_config: Callable[[str], Path]
) -> None:
    """``~/.cargo``, ``~/.m2``, ``~/.gradle``, ``~/.local`` are walked (their big
    generated trees are not): a store there is found, a stray token warned about."""
    for rel in (
        ".cargo/credentials.toml",
        ".cargo/registry/cache/credentials.toml",  # crates' files: left out
        ".m2/repository/credentials.txt",
        ".gradle/secret.properties",
        ".local/share/api_token",
        ".local/lib/python3/token.txt",
    ):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text("k")
    assert exposed_keys(home, []) == [
        home / ".cargo" / "credentials.toml",
        home / ".gradle" / "secret.properties",
        home / ".local" / "share" / "api_token",
    ]
    config = load_config(write_config(""))
    lines = keys_report(config, Castra(config.castra))
    assert lines[0] == ("ok", f"hidden from agents (keys): {home}/.cargo/credentials.toml")
    warned = [text.split(" ", 1)[0] for mark, text in lines if mark == "warn"]
    assert warned == [f"{home}/.gradle/secret.properties", f"{home}/.local/share/api_token"]


def test_a_search_over_a_folder_holding_a_key_store_is_refused(
    castra_dir: Path, home: Path
) -> None:
    """``Grep`` over ``$HOME`` would read inside ``~/.ssh`` (or a ``[sandbox] hide``
    folder without a dot): the guard refuses a search whose folder holds one."""
    (home / ".ssh").mkdir()
    (home / "code").mkdir()
    guard = PathGuard(Castra(castra_dir), "vorenus", None)
    for tool in ("Grep", "Glob"):
        reason = guard.check(tool, {"pattern": "x", "path": str(home)}, str(home / "code"))
        assert reason and ".ssh" in reason, tool
        assert guard.check(tool, {"pattern": "x", "path": str(home / "code")}) is None
