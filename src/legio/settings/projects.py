"""The project tables of ``legio.toml``: ``[forge]``, ``[projects]``'s own keys and each
``[projects.<name>]`` (see docs/projects.md)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from legio.settings.strict import ENV_NAME, Strict


class ForgeSettings(Strict):
    """Where projects' pull requests, CI and issues live (``[forge]``): GitHub or GitHub
    Enterprise through the REST API; the token is read once, never shown to agents."""

    kind: Literal["github"] = "github"
    api_url: str = "https://api.github.com"  # GitHub Enterprise: https://<host>/api/v3
    token_env: str = "GITHUB_TOKEN"
    # CI of a pull request Legio opened is polled this often, doubling to max_poll_seconds
    # while nothing changes (conditional requests: an unchanged answer costs no rate limit)
    poll_seconds: float = Field(30, gt=0, le=3600)
    max_poll_seconds: float = Field(300, gt=0, le=24 * 3600)
    follow_reviews: bool = False  # a review asking for changes goes to the agent unasked

    @field_validator("api_url")
    @classmethod
    def _api(cls, value: str) -> str:
        if not re.match(r"https?://[^\s/]+(/\S*)?\Z", value):
            raise ValueError(
                'must be an http(s) URL, e.g. "https://api.github.com" or '
                '"https://github.example.com/api/v3"'
            )
        return value.rstrip("/")

    @field_validator("token_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not ENV_NAME.match(value):
            raise ValueError("must be the name of an environment variable, e.g. GITHUB_TOKEN")
        return value


class ProjectSettings(Strict):
    """One of Caesar's git repositories agents may work on (``[projects.<name>]``), each
    agent in its own clone on its own branch (see docs/projects.md)."""

    path: Path
    base: str = ""  # the branch agents start from; "" = the repository's current branch
    # a shell command run in an agent's copy after a turn changed it ("" = no check),
    # sandboxed like the agent's shell commands, with no network (docs/projects.md)
    check: str = ""
    check_timeout: float = Field(15, gt=0, le=24 * 60)  # minutes; then it is killed

    @field_validator("check")
    @classmethod
    def _check(cls, value: str) -> str:
        if value and not value.strip():
            raise ValueError('must be a shell command, e.g. "make test", or "" for no check')
        if "\0" in value:
            raise ValueError("must not hold a NUL character")
        if len(value) > MAX_CHECK_CHARS:
            raise ValueError(
                f"is {len(value)} characters; keep it under {MAX_CHECK_CHARS} "
                "(put a longer one in a script in the project and run that)"
            )
        return value.strip()

    @model_validator(mode="after")
    def _timeout_needs_check(self) -> ProjectSettings:
        if "check_timeout" in self.model_fields_set and not self.check:
            raise ValueError(
                'check_timeout is set but check is not: add check = "make test" (the '
                "command to run), or remove check_timeout"
            )
        return self

    repo: str = ""  # "owner/name" on the forge; "" = read from the remote's URL
    remote: str = "origin"  # the remote Publish pushes to
    # ✅ Merge's method: "squash", "merge" or "rebase"; "" = the forge's (what the repo allows)
    merge: Literal["", "squash", "merge", "rebase"] = ""

    @field_validator("repo")
    @classmethod
    def _repo(cls, value: str) -> str:
        if value and not _REPO.match(value):
            raise ValueError('must be "owner/name" as on the forge, e.g. "caesar/app"')
        return value

    @field_validator("remote")
    @classmethod
    def _remote(cls, value: str) -> str:
        if value.startswith("-") or not _BRANCH.match(value) or ".." in value or "/" in value:
            raise ValueError('must be the name of a git remote, e.g. "origin"')
        return value

    @field_validator("base")
    @classmethod
    def _branch(cls, value: str) -> str:
        if value and (value.startswith("-") or not _BRANCH.match(value) or ".." in value):
            raise ValueError('must be a branch name, e.g. "main"')
        return value


_BRANCH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}\Z")
MAX_CHECK_CHARS = 2000
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}\Z")


class ProjectOptions(Strict):
    """What holds for every project: the keys of ``[projects]`` itself that have a value.
    Its tables (``[projects.app]``) are the projects; ``Config`` splits the two."""

    # what publishing one agent's branch may bring into a project's .git at once
    max_publish_mb: float = Field(200, gt=0)
    # the address space each git Legio runs itself may take (RLIMIT_AS; legio.projects.gitsafe)
    git_memory_mb: float = Field(2048, ge=64)
