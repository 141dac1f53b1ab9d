"""``[forge]`` and the projects' ``repo``/``remote`` keys: defaults, clear errors, written
back; the forge token variable hidden from agents even without ``[forge]``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from legio.config import config_to_toml, load_config
from legio.errors import ConfigError
from legio.fence.policy import denied_env_names


def test_defaults_and_values(write_config: Callable[[str], Path], tmp_path: Path) -> None:
    config = load_config(write_config(""))
    assert config.forge is None and config.forge_token_env() == "GITHUB_TOKEN"
    config = load_config(
        write_config(
            '[forge]\n\n[projects.app]\npath = "app"\nrepo = "caesar/app"\nremote = "upstream"\n'
        )
    )
    assert config.forge is not None
    assert (config.forge.kind, config.forge.api_url, config.forge.token_env) == (
        "github",
        "https://api.github.com",
        "GITHUB_TOKEN",
    )
    assert (config.projects["app"].repo, config.projects["app"].remote) == (
        "caesar/app",
        "upstream",
    )
    again = load_config(write_config(config_to_toml(config)))
    assert again.forge == config.forge and again.projects["app"].repo == "caesar/app"
    bare = load_config(write_config(""))
    assert "[forge]" not in config_to_toml(bare)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[forge]\nkind = "gitlab"\n', "forge.kind"),
        ('[forge]\napi_url = "api.github.com"\n', "forge.api_url: must be an http(s) URL"),
        ('[forge]\ntoken_env = "MY TOKEN"\n', "forge.token_env: must be the name of"),
        ('[projects.app]\npath = "app"\nrepo = "app"\n', 'must be "owner/name"'),
        ('[projects.app]\npath = "app"\nremote = "-x"\n', "must be the name of a git remote"),
    ],
)
def test_bad_values_are_named(write_config: Callable[[str], Path], text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(text))
    assert problem in str(caught.value)


def test_the_forge_token_is_hidden_even_without_a_forge(
    write_config: Callable[[str], Path],
) -> None:
    config = load_config(write_config(""))
    assert "GITHUB_TOKEN" in denied_env_names(config, {"GITHUB_TOKEN": "x", "HOME": "/h"})
    config = load_config(write_config('[forge]\ntoken_env = "MY_FORGE_KEY"\n'))
    hidden = denied_env_names(config, {"MY_FORGE_KEY": "x", "GH_TOKEN": "y", "PATH": "/bin"})
    assert hidden == ["GH_TOKEN", "MY_FORGE_KEY"]
