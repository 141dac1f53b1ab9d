"""``legio run``'s start: the bot token read once, and kept out of every environment.

Removing a variable from ``os.environ`` is not enough: ``/proc/<pid>/environ`` shows
the environment a process was *started* with, and any process of the same user can
read it. So ``legio run`` reads the token, and, while its environment still holds the
token or a variable matching ``[claude] env_deny``, starts itself again in the same
process (``execve``, same pid) with those variables left out; the token travels
through an inherited pipe (``LEGIO_TOKEN_FD``) that the new image reads and closes first
thing, non-dumpable before it reads (``legio.fence.handoff``, called by ``python -m legio``
before any other import), and so does the forge token (``[forge] token_env``, then held by
``legio.fence.vault``). Then the process makes itself non-dumpable (Linux ``prctl``): its memory and
``/proc`` files are closed to other processes of the same user. The Claude CLIs it
starts are ordinary processes again (``execve`` resets the flag).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import sys
from pathlib import Path

from legio.config import Config
from legio.errors import LegioError
from legio.fence import handoff
from legio.fence.handoff import TOKEN_FD_ENV, non_dumpable
from legio.fence.keys import remember_sockets
from legio.fence.policy import denied_env_names
from legio.fence.vault import forge_token, keep

logger = logging.getLogger(__name__)

PR_GET_DUMPABLE = 3


def is_dumpable() -> bool | None:
    """This process's dumpable flag (Linux), or None where it cannot be read."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return bool(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0))
    except (OSError, AttributeError):
        return None


def restart_argv(config: Config, command: str = "run") -> list[str]:
    """The command line the daemon starts itself again with (same interpreter). ``-P``:
    the current folder is not searched for modules (a ``ctypes.py`` planted there would
    run before the token pipe is read); the config file is named by its absolute path
    (the current folder is kept: relative paths of the environment still mean the same)."""
    config_args = ["-c", str(Path(config.path).absolute())] if config.path is not None else []
    return [sys.executable, "-P", "-m", "legio", command, *config_args]


def start_again(config: Config, token: str, command: str = "run") -> None:
    """Replace this process with a new ``legio <command>`` (same pid: ``/restart``, an
    upgrade), the token handed over through a pipe as at start; returns only if the
    ``execve`` failed (``OSError``)."""
    env = {k: v for k, v in os.environ.items() if k not in denied_env_names(config)}
    _exec_with_token(config, token, command, env)


def _exec_with_token(config: Config, token: str, command: str, env: dict[str, str]) -> None:
    read, write = os.pipe()
    try:
        os.write(write, f"{token}\n{forge_token(config)}".encode())  # the forge's too
        os.close(write)
        os.set_inheritable(read, True)
        env[TOKEN_FD_ENV] = str(read)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, restart_argv(config, command), env)
    except OSError:
        with contextlib.suppress(OSError):
            os.close(read)
        raise


def take_token(config: Config, command: str = "run") -> str:
    """The bot token, with this process's environment free of it (and of every
    ``env_deny`` variable) for good. May replace this process (``execve``, as
    ``legio <command>``) once: the new image returns from here with the token."""
    handoff.receive()  # python -m legio did already; a caller of cli.main may not have
    handed = handoff.take()
    if handoff.failure():
        raise LegioError(
            f"could not read the bot token handed over at start ({handoff.failure()}); "
            f"start Legio with `legio run`, not with {TOKEN_FD_ENV} set by hand"
        )
    if handed is not None:
        token, forge = handed
        keep(config.forge_token_env(), forge)
        keep(config.telegram.token_env, token)  # a file holding it is hidden from agents
        non_dumpable()
        return token
    token = config.telegram_token()
    keep(config.telegram.token_env, token)
    forge_token(config)  # kept in the vault before the variable goes
    secrets = denied_env_names(config)
    remember_sockets(os.environ)  # agents' sockets stay hidden once their variables go
    if secrets:
        env = {k: v for k, v in os.environ.items() if k not in secrets}
        try:
            _exec_with_token(config, token, command, env)
        except OSError as e:  # no re-exec: the variables stay in /proc/<pid>/environ
            logger.warning(
                "could not restart without secrets in the environment (%s): %s remain "
                "readable in /proc/%d/environ",
                e,
                ", ".join(secrets),
                os.getpid(),
            )
    for name in secrets:
        os.environ.pop(name, None)
    non_dumpable()
    return token
