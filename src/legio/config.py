"""The pydantic model of ``legio.toml``: load, validate, write.

``load_config`` turns every way a config can be wrong (missing file, TOML syntax,
unknown key, wrong type, negative number, missing castra folder) into one
``ConfigError`` that lists each problem by key, so ``legio check`` and ``legio run``
can print it instead of a traceback. Relative paths resolve against the folder of
the config file, never against the current directory.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from legio.errors import ConfigError
from legio.jobs.schedule import zone_name_error
from legio.names import NAME, NAME_RULE
from legio.settings.projects import ForgeSettings, ProjectOptions, ProjectSettings
from legio.settings.strict import ENV_NAME, Strict
from legio.shell.rules import DEFAULT_ASK, rule_problems

CONFIG_ENV = "LEGIO_CONFIG"
DEFAULT_CONFIG_NAME = "legio.toml"

MODEL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")  # a [models] key: @vorenus:<name>


class ClaudeSettings(Strict):
    """How agents reach Claude: the CLI and its permission mode."""

    cli_path: str = ""
    permission_mode: Literal["default", "acceptEdits", "plan", "bypassPermissions"] = (
        "bypassPermissions"
    )
    env_deny: list[str] = Field(default_factory=lambda: ["TELEGRAM_*", "*_BOT_TOKEN"])


class TelegramSettings(Strict):
    """The Telegram front-end: where the token is, who Caesar is, which server."""

    token_env: str = "TELEGRAM_BOT_TOKEN"
    caesar_ids: list[int] = Field(default_factory=list)
    allowed_chats: list[int] = Field(default_factory=list)
    base_url: str = ""
    stream: bool = True  # answers stream into drafts (sendMessageDraft) in private chats
    reactions: bool = True  # 👀 on a request taken, 👌 once answered; Caesar's reactions heard

    @field_validator("token_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not ENV_NAME.match(value):
            raise ValueError("must be the name of an environment variable, e.g. TELEGRAM_BOT_TOKEN")
        return value

    @field_validator("caesar_ids")
    @classmethod
    def _positive_ids(cls, value: list[int]) -> list[int]:
        bad = [i for i in value if i <= 0]
        if bad:
            raise ValueError(f"Telegram user ids are positive whole numbers, got {bad}")
        return value

    @field_validator("allowed_chats")
    @classmethod
    def _group_ids(cls, value: list[int]) -> list[int]:
        bad = [i for i in value if i >= 0]
        if bad:
            raise ValueError(
                f"group chat ids are negative whole numbers (e.g. -1001234567890), got {bad}; "
                "private chats with caesar_ids are always allowed"
            )
        return value

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if value and not re.match(r"https?://[^\s/]+", value):
            raise ValueError("must be empty or an http(s) URL, e.g. http://127.0.0.1:8081/bot")
        return value


class MemoriaSettings(Strict):
    """Limits of the shared memory."""

    max_document_bytes: int = Field(64 * 1024, ge=1024, le=16 * 1024 * 1024)
    max_commentarii: int = Field(1000, ge=1, le=1_000_000)


DEFAULT_ALLOWED_DOMAINS = [
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "github.com",
    "codeload.github.com",
    "objects.githubusercontent.com",
    "raw.githubusercontent.com",
]
_DOMAIN = re.compile(
    r"(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\Z"
)


class SandboxConfig(Strict):
    """The OS sandbox of agents' shell commands (see docs/security.md)."""

    mode: Literal["auto", "off"] = "auto"
    allowed_domains: list[str] = Field(default_factory=lambda: list(DEFAULT_ALLOWED_DOMAINS))
    hide: list[str] = Field(default_factory=list)  # more paths no agent may read
    # more folders a project's check reads (a toolchain in a home folder: ~/.pyenv)
    check_read: list[str] = Field(default_factory=list)
    # limits on each check (legio.fence.checklimits): processes, memory, its /tmp
    check_processes: int = Field(1024, ge=16, le=1_000_000)
    check_memory_mb: int = Field(4096, ge=32, le=1_048_576)
    check_tmp_mb: int = Field(1024, ge=1, le=1_048_576)
    # the largest commit (its files, summed) a check checks out on disk
    check_tree_mb: int = Field(4096, ge=1, le=1_048_576)

    @field_validator("hide", "check_read")
    @classmethod
    def _hide(cls, value: list[str]) -> list[str]:
        bad = [p for p in value if not p.strip() or "\0" in p or any(c in p for c in "*?[")]
        if bad:
            raise ValueError(
                f"not paths: {bad}; write existing files or folders (a glob would stop "
                "the sandbox from starting)"
            )
        return value

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, value: list[str]) -> list[str]:
        bad = [d for d in value if not _DOMAIN.match(d)]
        if bad:
            raise ValueError(
                f'not domain names: {bad}; write hosts like "pypi.org" or "*.example.com" '
                "(no scheme, path or port)"
            )
        return value


class SchedulerSettings(Strict):
    """Scheduled jobs (reminders, recurring requests)."""

    max_jobs: int = Field(50, ge=1, le=10_000)


class ApprovalSettings(Strict):
    """Tool calls that wait for Caesar's answer (rules in the Claude CLI's syntax)."""

    ask: list[str] = Field(default_factory=lambda: list(DEFAULT_ASK))
    timeout: float = Field(10, gt=0, le=24 * 60)  # minutes; no answer counts as Deny

    @field_validator("ask")
    @classmethod
    def _rules(cls, value: list[str]) -> list[str]:
        problems = rule_problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value


class BudgetSettings(Strict):
    """Spending limits in US dollars (0: no limit), counted from Legio's turn records."""

    daily_usd: float = Field(0, ge=0)  # the whole legion, per day in the owner's time zone
    # a runaway turn is cut here by default (the CLI's max_budget_usd); 0: no cap
    per_turn_usd: float = Field(5.0, ge=0)


OPTIONS = "project_options"  # where [projects]'s own keys go in the model


class VoiceSettings(Strict):
    """Caesar's voice notes, transcribed on this machine by faster-whisper."""

    enabled: bool = True
    # a faster-whisper size ("tiny", "base", "small", "medium", "large-v3", "turbo"), a
    # Hugging Face id ("Systran/faster-whisper-small"), or a local model folder ("./models/x")
    model: str = "base"
    max_minutes: float = Field(20, gt=0, le=24 * 60)  # longer notes are refused, not transcribed
    language: str = ""  # a Whisper language code ("en", "it"); "" = detected per note

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        if not value.strip():
            raise ValueError('must name a model, e.g. "base", or a model folder')
        return value.strip()

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        if value and not _LANGUAGE.match(value):
            raise ValueError('must be "" (detected) or a Whisper language code, e.g. "en" or "it"')
        return value


_LANGUAGE = re.compile(r"[a-z]{2,3}\Z")


class BackupSettings(Strict):
    """Automatic backups of the castra (``legio backup`` by hand works without them)."""

    every: Literal["off", "hourly", "daily", "weekly"] = "off"
    keep: int = Field(7, ge=1, le=10_000)  # the newest archives kept; older ones removed
    dir: Path = Path("")  # "" = castra/state/backups/; relative to legio.toml's folder
    attachments: bool = False  # also copy castra/attachments/ (can be large)
    # a folder other local users can write (or swap) is refused unless this is true
    allow_shared_folder: bool = False


class DigestSettings(Strict):
    """The morning digest: one silent message a day, built from the records."""

    at: str = ""  # "08:00" in the configured timezone; "" = no digest

    @field_validator("at")
    @classmethod
    def _time(cls, value: str) -> str:
        if value and not re.fullmatch(r"([01][0-9]|2[0-3]):[0-5][0-9]", value):
            raise ValueError('must be "" (off) or a time of day as HH:MM, e.g. "08:00"')
        return value


class SessionSettings(Strict):
    """Agents' turns as Legio watches them (``legio.operations.stuck``)."""

    # a turn whose CLI has sent nothing this long is said to Caesar (Stop / Keep waiting)
    stuck_minutes: float = Field(10, gt=0, le=24 * 60)


class HealthSettings(Strict):
    """The optional HTTP health endpoint (``GET /health``): off while ``listen`` is empty."""

    listen: str = ""  # "127.0.0.1:8787"; "" = no endpoint
    allow_remote: bool = False  # a non-loopback address is refused unless this is true

    @field_validator("listen")
    @classmethod
    def _address(cls, value: str) -> str:
        host, _, port = value.rpartition(":")
        if value and (not host or not port.isdigit() or not 0 <= int(port) < 65536):
            raise ValueError('must be "host:port", e.g. "127.0.0.1:8787", or "" (off)')
        return value


class WebSettings(HealthSettings):
    """The cockpit (``legio.frontends.web``): ``listen`` and ``allow_remote`` as for
    ``[health]``; ``public_url`` the https address Caesar's phone reaches ("": only
    ``legio cockpit``'s links), checked with the rest by ``web_problem``."""

    public_url: str = ""


class LogSettings(Strict):
    """The log file ``castra/state/legio.log``: rotated at ``max_mb``, ``keep`` old files."""

    max_mb: float = Field(10, gt=0)
    keep: int = Field(5, ge=0, le=1000)


class ModelChoice(Strict):
    """One entry of ``[models]`` (``legio.limits.prices``): the id ``--model`` and
    ``set_model`` take (the CLI's aliases ``opus``/``sonnet``/``haiku`` work) and the price
    in US dollars per million tokens (the budget's "would this turn fit")."""

    id: str = Field(min_length=1, max_length=100)
    input_usd: float = Field(ge=0)
    output_usd: float = Field(ge=0)


def default_models() -> dict[str, ModelChoice]:
    """``[models]`` when legio.toml has none: the CLI's aliases at their list prices."""
    prices = {"opus": (5.0, 25.0), "sonnet": (3.0, 15.0), "haiku": (1.0, 5.0)}
    return {n: ModelChoice(id=n, input_usd=i, output_usd=o) for n, (i, o) in prices.items()}


class DiskSettings(Strict):
    """The castra's free disk space: a notice under ``warn_mb``, no new file under
    ``refuse_mb``."""

    warn_mb: float = Field(1024, ge=0)
    refuse_mb: float = Field(200, ge=0)


class Config(Strict):
    """Everything in ``legio.toml``; ``path`` is where it was read from."""

    castra: Path = Path("castra")
    model: str = ""
    history_window: int = Field(50, ge=1, le=10_000)
    history_token_budget: int = Field(40_000, ge=1_000, le=1_000_000)
    session_idle_timeout_minutes: float = Field(5, gt=0)  # docs/performance.md: why 5
    max_input_tokens: int = Field(150_000, ge=1_000)
    max_transcript_kib: int = Field(1024, ge=0)  # a session's CLI transcript; 0: no bound
    shutdown_grace_seconds: float = Field(20, ge=0, le=3600)
    timezone: str = ""  # the owner's IANA zone for scheduled jobs; "" = the machine's
    claude: ClaudeSettings = Field(default_factory=ClaudeSettings)
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    memoria: MemoriaSettings = Field(default_factory=MemoriaSettings)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    approvals: ApprovalSettings = Field(default_factory=ApprovalSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    voice: VoiceSettings = Field(default_factory=VoiceSettings)
    forge: ForgeSettings | None = None  # no [forge]: no publishing, CI or issues
    backup: BackupSettings = Field(default_factory=BackupSettings)
    digest: DigestSettings = Field(default_factory=DigestSettings)
    sessions: SessionSettings = Field(default_factory=SessionSettings)
    health: HealthSettings = Field(default_factory=HealthSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    disk: DiskSettings = Field(default_factory=DiskSettings)
    models: dict[str, ModelChoice] = Field(default_factory=default_models)
    projects: dict[str, ProjectSettings] = Field(default_factory=dict)
    project_options: ProjectOptions = Field(default_factory=ProjectOptions, exclude=True)

    path: Path | None = Field(default=None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _project_options(cls, data: Any) -> Any:
        """In ``[projects]``, a table is a project and a key with a value (``max_publish_mb
        = 200``) is an option for all of them: the options go to ``project_options``."""
        if not isinstance(data, dict) or OPTIONS in data:
            return data
        projects = data.get("projects")
        if not isinstance(projects, dict):
            return data
        tables = {k: v for k, v in projects.items() if isinstance(v, dict)}
        options = {k: v for k, v in projects.items() if not isinstance(v, dict)}
        return {**data, "projects": tables, OPTIONS: options}

    @field_validator("models")
    @classmethod
    def _model_names(cls, value: dict[str, ModelChoice]) -> dict[str, ModelChoice]:
        bad = [n for n in value if not MODEL_NAME.fullmatch(n) or n == "default"]
        if bad:
            raise ValueError(
                f"model names are short words (letters, digits, - and _; not 'default'), got {bad}"
            )
        return value

    @field_validator("projects")
    @classmethod
    def _project_names(cls, value: dict[str, ProjectSettings]) -> dict[str, ProjectSettings]:
        bad = [name for name in value if not NAME.match(name)]
        if bad:
            raise ValueError(f"project names {bad} must be {NAME_RULE}")
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        problem = zone_name_error(value) if value else None
        if problem:
            raise ValueError(problem)
        return value

    def telegram_token(self) -> str:
        """The bot token from the environment variable named by ``telegram.token_env``."""
        return os.environ.get(self.telegram.token_env, "").strip()

    def forge_token_env(self) -> str:
        """The variable the forge token is read from (hidden from agents even without
        ``[forge]``: a ``GITHUB_TOKEN`` in Legio's environment is never theirs)."""
        return (self.forge or ForgeSettings()).token_env


def default_config_path() -> Path:
    """``$LEGIO_CONFIG`` if set, else ``./legio.toml``."""
    return Path(os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_NAME)


def _describe(error: dict[str, Any]) -> str:
    loc = ".".join(str(p) for p in error["loc"]) or "(top level)"
    loc = "projects." + loc.removeprefix(OPTIONS + ".") if loc.startswith(OPTIONS) else loc
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"{loc}: unknown key (see docs/configuration.md for the keys Legio reads)"
    message = str(error["msg"])
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if kind == "missing":
        return f"{loc}: required"
    return f"{loc}: {message} (got {error['input']!r})"


def load_config(path: Path | str | None = None) -> Config:
    """Read and validate a config file; raise ``ConfigError`` listing every problem."""
    source = Path(path) if path is not None else default_config_path()
    try:
        raw = tomllib.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            source, ["file not found: create one with `legio init`, or pass -c FILE"]
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(source, [f"cannot read the file: {e}"]) from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(source, [f"TOML syntax error: {e}"]) from e
    try:
        config = Config.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(source, [_describe(err) for err in e.errors()]) from e  # type: ignore[arg-type]
    base = source.resolve().parent
    castra = config.castra if config.castra.is_absolute() else base / config.castra
    if not castra.is_dir():
        raise ConfigError(
            source,
            [
                f"castra: the folder {castra} does not exist; "
                "create it with `legio init` or point `castra` at an existing one"
            ],
        )
    for project in config.projects.values():
        project.path = (base / project.path.expanduser()).resolve()
    if config.voice.model.startswith(("./", "../", "~")):  # a folder; "org/name" is a hub id
        config.voice.model = str((base / Path(config.voice.model).expanduser()).resolve())
    hidden = [(base / Path(p).expanduser()).resolve() for p in config.sandbox.hide]
    problems = [
        f"sandbox.hide: {path} does not exist (hide what is there)"
        for path in hidden
        if not os.path.lexists(path)
    ] + [
        f"sandbox.hide: {path} holds the castra; agents work there"
        for path in hidden
        if path == castra.resolve() or path in castra.resolve().parents
    ]
    readable = [(base / Path(p).expanduser()).resolve() for p in config.sandbox.check_read]
    home = castra.resolve()
    problems += [
        f"sandbox.check_read: {path} does not exist (list what is there)"
        for path in readable
        if not path.exists()
    ] + [
        f"sandbox.check_read: {path} holds or is in the castra; a check sees its own copy only"
        for path in readable
        if path == home or path in home.parents or home in path.parents
    ]
    if problems:
        raise ConfigError(source, problems)
    config.sandbox.hide = [str(path) for path in hidden]
    config.sandbox.check_read = [str(path) for path in readable]
    if str(config.backup.dir) not in ("", "."):
        # as written, links not followed: backupfolder.link_problem judges each one
        config.backup.dir = Path(os.path.abspath(base / config.backup.dir.expanduser()))
    cli_path = config.claude.cli_path
    if cli_path and not Path(cli_path).is_absolute() and ("/" in cli_path):
        config.claude.cli_path = str(base / cli_path)
    config.castra = castra
    config.path = source.resolve()
    return config


def config_to_toml(config: Config, castra: str = "castra") -> str:
    """Render a config as TOML (tomli-w), with ``castra`` written as given."""
    data = config.model_dump(mode="json")
    data["castra"] = castra
    if data.get("forge") is None:
        data.pop("forge", None)  # TOML has no null: no [forge] table
    for key in ("session_idle_timeout_minutes", "shutdown_grace_seconds"):
        if float(data[key]).is_integer():
            data[key] = int(data[key])
    options = config.project_options.model_dump(mode="json", exclude_defaults=True)
    if float(options.get("max_publish_mb", 0.5)).is_integer():
        options["max_publish_mb"] = int(options["max_publish_mb"])
    for table in data["projects"].values():  # a project's defaults stay unwritten
        if not table["check"]:
            del table["check"], table["check_timeout"]
        elif float(table["check_timeout"]).is_integer():
            table["check_timeout"] = int(table["check_timeout"])
    data["projects"] = {**options, **data["projects"]}  # [projects]'s own keys, then tables
    if float(data["voice"]["max_minutes"]).is_integer():
        data["voice"]["max_minutes"] = int(data["voice"]["max_minutes"])
    return tomli_w.dumps(data)
