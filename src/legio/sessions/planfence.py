"""Plan mode as a fence: what a plan turn may do, and its plan file read safely.

Until Caesar taps ✅ Go, a plan turn (``legio.sessions.planning``) changes nothing:
``refusal`` is what ``legio.sessions.gatekeeper`` denies in the ``PreToolUse`` hook and
in ``can_use_tool`` alike. It allows the tools that only read (``READ_ONLY``), the
questions to Caesar (``AskUserQuestion``, ``ExitPlanMode``), a Write or Edit of one
``.md`` file directly in the working directory's ``.plans/`` (the plan itself), and a
Bash line ``legio.shell.readonly`` knows to only read. Everything else (other file tools,
a subagent, MCP tools, a line that may write) is refused with a reason telling the agent
it is planning. The CLI's own plan mode is no such fence: with ``bypassPermissions`` it
let Write, Edit and ``echo > f`` run (issue 47).

The plan Caesar sees, Legio stores and the CLI gives back to the model after Go comes
from the plan file, which the CLI reads outside the sandbox, following links. So
(PROTOCOLS.md, "Plan mode"): the sandbox may not write in ``.plans/`` (its
``filesystem.denyWrite``, ``legio.sessions.spec``); ``scrub`` removes every link (and
any entry that is no single regular file) from ``.plans/`` when the session starts and
when a plan arrives, never following one; and ``read_plan`` reads the plan file itself,
through ``O_NOFOLLOW`` descriptors below the working directory, a regular file with one
name, at most ``PLAN_MAX`` bytes. A plan whose file is refused is denied without asking
Caesar.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
from pathlib import Path
from typing import Any

from legio.fence.safefs import UnsafePath, open_dir, open_file
from legio.projects.copies import PLANS
from legio.shell.readonly import not_read_only
from legio.visible import visible

logger = logging.getLogger(__name__)

PLAN_MAX = 256 * 1024  # bytes of a plan file Legio reads (Telegram shows it in parts)
READ_ONLY = frozenset(
    [
        "Read",
        "Glob",
        "Grep",
        "LS",
        "NotebookRead",
        "WebFetch",
        "WebSearch",
        "TodoWrite",
        "BashOutput",
        "ListMcpResourcesTool",
        "ReadMcpResourceTool",
    ]
)
ASKING = frozenset({"AskUserQuestion", "ExitPlanMode"})
PLAN_WRITERS = frozenset({"Write", "Edit", "MultiEdit"})
REFUSED_PLAN = (
    "Legio refuses this plan: {why}. Write your plan with the Write tool as one plain .md "
    "file in {plans}/ of your working directory, then call ExitPlanMode again."
)
PLANNING = (
    "Legio refuses this: you are planning (plan mode), so you must not change anything "
    "until Caesar approves your plan: {why}. Read and look around as you need, write your "
    "plan in {plans}/, then propose it with ExitPlanMode."
)


def plan_target(plans: Path | None, raw: object) -> str | None:
    """The name of the plan file ``raw`` (a tool's path) is, when it is one ``.md`` file
    directly in ``plans``; else None. Relative paths start at the working directory."""
    if plans is None or not isinstance(raw, str) or not raw.endswith(".md") or "\0" in raw:
        return None
    path = Path(os.path.normpath(plans.parent / os.path.expanduser(raw)))
    if path.parent != Path(os.path.normpath(plans)) or path.name.startswith("."):
        return None
    return path.name


def refusal(plans: Path | None, tool: str, tool_input: dict[str, Any]) -> str:
    """Why a plan turn may not make this call ("" when it may); see the module."""
    if tool in READ_ONLY or tool in ASKING:
        return ""
    if tool in PLAN_WRITERS:
        if plan_target(plans, tool_input.get("file_path")) is not None:
            return ""
        why = f"{tool} may only write your plan file, one .md file in {PLANS}/"
    elif tool == "Bash":
        command = tool_input.get("command")
        why = not_read_only(command) if isinstance(command, str) else "no command"
        if not why:
            return ""
        why = f"this line is not known to only read: {why}"
    else:
        why = f"{tool} is not a tool that only reads"
    return PLANNING.format(why=why, plans=PLANS)


def _strays(dir_fd: int) -> list[str]:
    """The entries of ``.plans`` that are no plan file: links, folders, FIFOs, a file
    with more than one name (a hard link to a file elsewhere)."""
    strays = []
    for name in os.listdir(dir_fd):
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            strays.append(name)
    return strays


def scrub(cwd: Path) -> list[str]:
    """Make ``cwd/.plans`` a real folder (a link in its place is replaced) holding only
    regular files with one name: the other entries are removed (a link itself, never
    what it points at; a folder with what is in it). The names removed."""
    fd = open_dir(cwd, [PLANS], create=True, mode=0o700)
    try:
        strays = _strays(fd)
        for name in strays:
            logger.warning("%s/%s/%s is no plan file: removed", cwd, PLANS, name)
            try:
                os.unlink(name, dir_fd=fd)
            except IsADirectoryError:
                _remove_tree(fd, name)
            except OSError as e:
                if e.errno not in (errno.EISDIR, errno.EPERM):
                    raise
                _remove_tree(fd, name)
        return strays
    finally:
        os.close(fd)


def _remove_tree(parent_fd: int, name: str) -> None:
    inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)
    try:
        for entry in os.listdir(inner):
            try:
                os.unlink(entry, dir_fd=inner)
            except OSError:
                _remove_tree(inner, entry)
    finally:
        os.close(inner)
    os.rmdir(name, dir_fd=parent_fd)


def read_plan(plans: Path, raw: object) -> str:
    """The text of the plan file ``raw`` names (the CLI's ``planFilePath``), read by Legio
    itself (see the module). Raises ``UnsafePath`` (its message a sentence for the agent)
    when it is not one regular file directly in ``plans``, or too long."""
    name = plan_target(plans, raw)
    if name is None:
        raise UnsafePath(errno.EINVAL, f"the plan file {raw!r} is not one .md file in {PLANS}/")
    try:  # no link followed at .plans or the file; a regular file only
        fd = open_file(plans.parent, Path(PLANS) / name)
    except UnsafePath as e:
        raise UnsafePath(e.errno, f"{PLANS}/{name} is a link or not a plain file") from e
    with contextlib.closing(_Fd(fd)):
        st = os.fstat(fd)
        if st.st_nlink != 1:
            raise UnsafePath(errno.EINVAL, f"{PLANS}/{name} is not a plain file")
        if st.st_size > PLAN_MAX:
            raise UnsafePath(errno.EFBIG, f"{PLANS}/{name} is over {PLAN_MAX // 1024} KiB")
        data = b""
        while chunk := os.read(fd, PLAN_MAX + 1 - len(data)):
            data += chunk
            if len(data) > PLAN_MAX:
                break
    if len(data) > PLAN_MAX:
        raise UnsafePath(errno.EFBIG, f"{PLANS}/{name} is over {PLAN_MAX // 1024} KiB")
    return data.decode("utf-8", errors="replace")


def plan_text(tool_input: dict[str, Any], plans: Path | None) -> tuple[str, str]:
    """The plan (read from its file by Legio, or the agent's own ``plan`` argument when
    the CLI read no file) and why it is refused ("": it is not)."""
    try:
        if plans is None:
            raise UnsafePath(errno.EINVAL, "Legio does not know your plans folder")
        removed = scrub(plans.parent)
        if removed:
            raise UnsafePath(
                errno.EINVAL,
                f"Legio removed {', '.join(visible(n, '') for n in removed)} from {PLANS}/, "
                "which may hold nothing but plain files (no link)",
            )
        if "planFilePath" in tool_input:
            return read_plan(plans, tool_input["planFilePath"]), ""
    except OSError as e:
        logger.warning("a plan refused: %s", e)
        return "", REFUSED_PLAN.format(why=e.strerror or e, plans=PLANS)
    return str(tool_input.get("plan") or ""), ""


class _Fd:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        os.close(self.fd)
