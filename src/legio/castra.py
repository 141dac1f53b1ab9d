"""The castra: the data folder, and the prompt files that define the agents.

Layout::

    castra/
      legatus/prompt.md                      the Legatus's system prompt
      centuriones/<name>/prompt.md           one folder per centurio
      centuriones/<name>/commentarii/        its notes (memoria)
      edicta/  acta/                         shared memoria
      praetorium.db                          the message store

A prompt file may open with YAML frontmatter (``description``, ``model``,
``history_window``, ``tools``, ``cwd``, ``add_dirs``). Prompts are read from disk on every call,
cheaply, so an edit takes effect on the next message; the SHA-256 of the file and
the roster hash tell the sessions when to rebuild. Folders that cannot be
centuriones (bad or reserved names, no prompt, broken frontmatter) are reported in
``Roster.problems``, never silently used.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import frontmatter
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from legio.errors import CastraError
from legio.names import LEGATUS, NAME, NAME_RULE, RESERVED_NAMES
from legio.shell.rules import rule_problems

PROMPT_FILE = "prompt.md"
DESCRIPTION_MAX = 200


class Frontmatter(BaseModel):
    """The keys a prompt file's frontmatter may set."""

    model_config = ConfigDict(extra="forbid")

    description: str | None = None
    model: str | None = None
    history_window: int | None = Field(None, ge=1, le=10_000)
    history_token_budget: int | None = Field(None, ge=1_000, le=1_000_000)
    tools: list[str] | None = None
    cwd: str | None = None
    add_dirs: list[str] = Field(default_factory=list)
    ask: list[str] | None = None  # approval rules added to [approvals] ask for this agent
    daily_usd: float | None = Field(None, ge=0)  # this agent's daily spending limit
    project: str | None = None  # the [projects] entry its requests are on unless one says #other

    @field_validator("ask")
    @classmethod
    def _rules(cls, value: list[str] | None) -> list[str] | None:
        problems = rule_problems(value or [])
        if problems:
            raise ValueError("; ".join(problems))
        return value


def _frontmatter_problem(error: Any, path: Path) -> str:
    """One frontmatter problem, said the way a bad ``legio.toml`` key is."""
    key = ".".join(str(p) for p in error["loc"])
    if error["type"] == "extra_forbidden":
        known = list(Frontmatter.model_fields)
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"; did you mean `{close[0]}`?" if close else f" (the keys: {', '.join(known)})"
        return f"unknown key `{key}` in {path}{hint}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"`{key}` in {path}: {message} (got {error.get('input')!r})"


@dataclass(frozen=True)
class AgentPrompt:
    """One agent's prompt file, as read just now."""

    name: str
    path: Path
    body: str
    description: str
    settings: Frontmatter
    sha256: str
    mtime_ns: int


@dataclass(frozen=True)
class Roster:
    """The valid centuriones (sorted by name) and what was wrong with the rest."""

    centuriones: dict[str, AgentPrompt]
    problems: tuple[str, ...] = ()
    hash: str = field(default="")

    @property
    def names(self) -> list[str]:
        return list(self.centuriones)


def validate_centurio_name(name: str) -> str | None:
    """Why ``name`` cannot be a centurio, or None if it can."""
    if name in RESERVED_NAMES:
        return f"'{name}' is reserved ({', '.join(sorted(RESERVED_NAMES))} cannot be centuriones)"
    if not NAME.match(name):
        return f"'{name}' is not a valid centurio name: use {NAME_RULE}"
    return None


def _first_line_description(body: str) -> str:
    for line in body.splitlines():
        text = line.strip().lstrip("#").strip()
        if text:
            return text[:DESCRIPTION_MAX]
    return ""


_PARSED: dict[tuple[str, Path, str], AgentPrompt] = {}  # by content: a file read unchanged
_PARSED_MAX = 256  # is not parsed again (YAML + validation cost ~0.2 ms a file, per message)

# By path: a file whose stat is unchanged is not read again. Only a file last changed
# RACY_NS or more before it was read counts: a file system's clock is coarse (1 s on
# some), and an edit in the same tick as the read would keep mtime and size alike.
_READ: dict[tuple[str, Path], tuple[tuple[int, ...], AgentPrompt]] = {}
RACY_NS = 2_000_000_000
clock = time.time_ns  # what "now" is for that rule (a test's seam)


def read_prompt(name: str, path: Path) -> AgentPrompt:
    """Parse one prompt file; raise ``CastraError`` naming the file and the problem.

    Asked for every message: an unchanged file costs one ``stat``."""
    try:
        known = _READ.get((name, path))
        if known is not None and known[0] == _stamp(path.stat()):
            return known[1]
        read_at = clock()
        raw = path.read_bytes()
        st = path.stat()
    except FileNotFoundError:
        _READ.pop((name, path), None)
        raise CastraError(f"{path}: prompt file not found") from None
    except OSError as e:
        raise CastraError(f"{path}: cannot read the prompt file ({e.strerror})") from e
    key = (name, path, hashlib.sha256(raw).hexdigest())
    parsed = _PARSED.get(key)
    if parsed is None:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        parsed = _PARSED[key] = _parse_prompt(name, path, raw, key[2])
    prompt = replace(parsed, mtime_ns=st.st_mtime_ns)
    if read_at - max(st.st_mtime_ns, st.st_ctime_ns) >= RACY_NS:  # settled: remember it
        if len(_READ) >= _PARSED_MAX:
            _READ.clear()
        _READ[(name, path)] = (_stamp(st), prompt)
    return prompt


def _stamp(st: os.stat_result) -> tuple[int, ...]:
    """What changes when a file is written, replaced or touched (ctime cannot be set)."""
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_dev)


def _parse_prompt(name: str, path: Path, raw: bytes, sha256: str) -> AgentPrompt:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CastraError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    try:
        post = frontmatter.loads(text)
    except yaml.YAMLError as e:
        raise CastraError(f"{path}: the YAML frontmatter does not parse: {e}") from e
    try:
        settings = Frontmatter.model_validate(dict(post.metadata))
    except ValidationError as e:
        raise CastraError("; ".join(_frontmatter_problem(err, path) for err in e.errors())) from e
    body = post.content.strip()
    description = (settings.description or "").strip()[:DESCRIPTION_MAX] or (
        _first_line_description(body)
    )
    return AgentPrompt(
        name=name,
        path=path,
        body=body,
        description=description,
        settings=settings,
        sha256=sha256,
        mtime_ns=0,
    )


def roster_hash(centuriones: dict[str, AgentPrompt]) -> str:
    """SHA-256 of the sorted ``name:description`` pairs."""
    pairs = "\n".join(f"{n}:{centuriones[n].description}" for n in sorted(centuriones))
    return hashlib.sha256(pairs.encode("utf-8")).hexdigest()


class Castra:
    """Paths inside a castra folder, and reading its prompt files."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def legatus_prompt_path(self) -> Path:
        return self.root / LEGATUS / PROMPT_FILE

    @property
    def centuriones_dir(self) -> Path:
        return self.root / "centuriones"

    @property
    def praetorium_path(self) -> Path:
        return self.root / "praetorium.db"

    @property
    def attachments_dir(self) -> Path:
        """Every file sent to or by the agents, content-addressed (Legio's, not theirs)."""
        return self.root / "attachments"

    @property
    def edicta_dir(self) -> Path:
        return self.root / "edicta"

    @property
    def acta_dir(self) -> Path:
        return self.root / "acta"

    def centurio_dir(self, name: str) -> Path:
        return self.centuriones_dir / name

    def commentarii_dir(self, name: str) -> Path:
        return self.centurio_dir(name) / "commentarii"

    def read_legatus(self) -> AgentPrompt:
        """The Legatus's prompt; a missing file is a ``CastraError``."""
        return read_prompt(LEGATUS, self.legatus_prompt_path)

    def legatus_mtime_ns(self) -> int:
        """Modification time of the Legatus prompt (0 if it is missing)."""
        try:
            return self.legatus_prompt_path.stat().st_mtime_ns
        except OSError:
            return 0

    def read_centurio(self, name: str) -> AgentPrompt:
        """One centurio's prompt; bad names and missing files are ``CastraError``."""
        problem = validate_centurio_name(name)
        if problem:
            raise CastraError(problem)
        return read_prompt(name, self.centurio_dir(name) / PROMPT_FILE)

    def roster(self) -> Roster:
        """Every usable centurio, plus a line for each folder that is not usable."""
        centuriones: dict[str, AgentPrompt] = {}
        problems: list[str] = []
        folder = self.centuriones_dir
        entries = sorted(folder.iterdir()) if folder.is_dir() else []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            where = f"centuriones/{entry.name}"
            if not entry.is_dir():
                problems.append(
                    f"{where}: not a folder; each centurio is a folder with a prompt.md"
                )
                continue
            reason = validate_centurio_name(entry.name)
            if reason:
                problems.append(f"{where}: ignored, {reason}")
                continue
            try:
                centuriones[entry.name] = read_prompt(entry.name, entry / PROMPT_FILE)
            except CastraError as e:
                problems.append(f"{where}: ignored, {e}")
        return Roster(centuriones, tuple(problems), roster_hash(centuriones))
