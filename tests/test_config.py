"""legio.toml: defaults, path resolution, and the message a user sees for each mistake."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from legio.config import DEFAULT_ALLOWED_DOMAINS, Config, config_to_toml, load_config
from legio.errors import ConfigError

WriteConfig = Callable[[str], Path]


def problems_of(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return str(caught.value)


def test_shipped_example_config_loads() -> None:
    config = load_config(Path(__file__).parents[1] / "legio.toml")
    assert config.history_window == 50
    assert config.max_input_tokens == 150_000
    assert config.telegram.token_env == "TELEGRAM_BOT_TOKEN"
    assert config.castra == Path(__file__).parents[1] / "castra"
    assert config.sandbox.mode == "auto"
    assert config.sandbox.allowed_domains == DEFAULT_ALLOWED_DOMAINS


def test_empty_file_gives_the_documented_defaults(write_config: WriteConfig) -> None:
    config = load_config(write_config(""))
    assert (config.history_window, config.session_idle_timeout_minutes) == (50, 5)
    assert config.claude.permission_mode == "bypassPermissions"
    assert config.claude.cli_path == ""
    assert config.telegram.caesar_ids == []
    assert config.model == ""
    assert config.sandbox.mode == "auto"
    assert "pypi.org" in config.sandbox.allowed_domains


def test_castra_resolves_against_the_config_folder_not_the_cwd(
    write_config: WriteConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config('castra = "castra"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_config(path).castra == tmp_path / "castra"


def test_unknown_key_is_named(write_config: WriteConfig) -> None:
    message = problems_of(write_config("histroy_window = 10\n"))
    assert "histroy_window: unknown key" in message
    assert "docs/configuration.md" in message


def test_unknown_key_in_a_table_is_named_with_its_table(write_config: WriteConfig) -> None:
    message = problems_of(write_config("[telegram]\ncaesar_id = [1]\n"))
    assert "telegram.caesar_id: unknown key" in message


def test_wrong_type_names_key_and_value(write_config: WriteConfig) -> None:
    message = problems_of(write_config('history_window = "fifty"\n'))
    assert "history_window:" in message
    assert "'fifty'" in message


def test_negative_number_is_refused(write_config: WriteConfig) -> None:
    message = problems_of(write_config("history_window = -5\n"))
    assert "history_window: Input should be greater than or equal to 1 (got -5)" in message


def test_every_problem_is_listed_at_once(write_config: WriteConfig) -> None:
    message = problems_of(
        write_config('max_input_tokens = 0\n[telegram]\ncaesar_ids = ["me"]\ntoken_env = "A B"\n')
    )
    assert "max_input_tokens:" in message
    assert "telegram.caesar_ids.0:" in message
    assert "telegram.token_env: must be the name of an environment variable" in message


def test_non_positive_telegram_ids_are_refused(write_config: WriteConfig) -> None:
    message = problems_of(write_config("[telegram]\ncaesar_ids = [0, -3]\n"))
    assert "positive whole numbers, got [0, -3]" in message


def test_allowed_chats_are_group_ids(write_config: WriteConfig) -> None:
    message = problems_of(write_config("[telegram]\nallowed_chats = [42]\n"))
    assert "telegram.allowed_chats: group chat ids are negative" in message
    config = load_config(write_config("[telegram]\nallowed_chats = [-1001234567890]\n"))
    assert config.telegram.allowed_chats == [-1001234567890]
    assert config.memoria.max_commentarii == 1000


def test_bad_permission_mode_lists_the_choices(write_config: WriteConfig) -> None:
    message = problems_of(write_config('[claude]\npermission_mode = "yolo"\n'))
    assert "claude.permission_mode:" in message
    assert "'bypassPermissions'" in message


def test_sandbox_mode_and_domains_are_checked(write_config: WriteConfig) -> None:
    message = problems_of(
        write_config(
            '[sandbox]\nmode = "never"\nallowed_domains = ["https://x.org/a", "*.ok.org"]\n'
        )
    )
    assert "sandbox.mode:" in message
    assert "'auto' or 'off'" in message
    assert "sandbox.allowed_domains: not domain names: ['https://x.org/a']" in message
    config = load_config(write_config('[sandbox]\nmode = "off"\nallowed_domains = []\n'))
    assert (config.sandbox.mode, config.sandbox.allowed_domains) == ("off", [])


def test_missing_castra_folder_says_how_to_create_it(write_config: WriteConfig) -> None:
    message = problems_of(write_config('castra = "nowhere"\n'))
    assert "castra: the folder" in message
    assert "nowhere does not exist" in message
    assert "legio init" in message


def test_missing_file_says_how_to_create_one(tmp_path: Path) -> None:
    message = problems_of(tmp_path / "absent.toml")
    assert "absent.toml" in message
    assert "legio init" in message


def test_toml_syntax_error_is_a_config_error(write_config: WriteConfig) -> None:
    message = problems_of(write_config("history_window = = 3\n"))
    assert "TOML syntax error" in message
    assert "line 1" in message


def test_base_url_must_be_http(write_config: WriteConfig) -> None:
    message = problems_of(write_config('[telegram]\nbase_url = "ftp://x"\n'))
    assert "telegram.base_url: must be empty or an http(s) URL" in message


def test_written_config_reads_back_identically(write_config: WriteConfig) -> None:
    original = Config(history_window=7, model="claude-x")
    original.telegram.caesar_ids = [42]
    config = load_config(write_config(config_to_toml(original)))
    assert config.history_window == 7
    assert config.model == "claude-x"
    assert config.telegram.caesar_ids == [42]
    assert "session_idle_timeout_minutes = 5\n" in config_to_toml(original)


def test_token_is_read_from_the_named_variable(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_config(write_config('[telegram]\ntoken_env = "MY_BOT"\n'))
    monkeypatch.delenv("MY_BOT", raising=False)
    assert config.telegram_token() == ""
    monkeypatch.setenv("MY_BOT", " 123:abc \n")
    assert config.telegram_token() == "123:abc"


def test_a_projects_check_and_its_timeout_are_checked(
    write_config: WriteConfig, tmp_path: Path
) -> None:
    repo = tmp_path / "app"
    repo.mkdir()
    config = load_config(
        write_config(
            f'[projects.app]\npath = "{repo}"\ncheck = " make test "\ncheck_timeout = 2.5\n'
        )
    )
    assert config.projects["app"].check == "make test"
    assert config.projects["app"].check_timeout == 2.5
    plain = load_config(write_config(f'[projects.app]\npath = "{repo}"\n'))
    assert (plain.projects["app"].check, plain.projects["app"].check_timeout) == ("", 15)
    written = config_to_toml(plain)
    assert "check =" not in written and "check_timeout" not in written  # none: unwritten
    assert 'check = "make test"\ncheck_timeout = 2.5' in config_to_toml(config)
    assert load_config(write_config(config_to_toml(config))).projects == config.projects
    bad = problems_of(
        write_config(
            f'[projects.app]\npath = "{repo}"\ncheck = "   "\n'
            f'[projects.web]\npath = "{repo}"\ncheck = "make"\ncheck_timeout = 0\n'
            f'[projects.api]\npath = "{repo}"\ncheck_timeout = 5\n'
            f'[projects.cli]\npath = "{repo}"\ncheck = "{"x" * 2001}"\n'
        )
    )
    assert 'projects.app.check: must be a shell command, e.g. "make test"' in bad
    assert "projects.web.check_timeout: Input should be greater than 0" in bad
    assert "projects.api: check_timeout is set but check is not" in bad
    assert "projects.cli.check: is 2001 characters; keep it under 2000" in bad
