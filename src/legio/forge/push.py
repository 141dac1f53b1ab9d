"""Pushing an agent's branch from the project to the forge: Legio's own git, the token
handed to git through a pipe, never in argv, a file or the environment.

``push_target`` reads the project's remote (``[projects.<name>] remote``, from the
project's own config: Caesar's, which no agent writes) and decides the URL and transport:
a local path or ``file://`` (tests, a mirror on the same machine) is pushed to as it is;
``https://<forge host>/…`` gets the token; an ssh or ``git@host:owner/name`` remote of
the forge's host becomes its https form (Legio uses no ssh key of its user); any other
host or ``http://`` is refused (the token goes to the forge's host, over TLS, only).

The token: git asks the credential helper Legio configures for this one command
(``GIT_CONFIG_*``: ``credential.helper`` emptied, then, for the target's own
``scheme://host`` only, a shell function that answers ``get`` by reading an inherited pipe
— and answers nothing when git asks for another protocol or host). Legio writes the token
into the pipe and closes its end before git starts; the first ``get`` drains it, so the
pipe is empty for the rest of the push. docs/security.md says why this and not
``http.extraHeader`` or a file.

Before a push with the token, ``check_config`` reads the project's own config (includes
not followed) and refuses it when a key there could send the push or the token elsewhere:
``url.*.insteadOf``/``pushInsteadOf``, ``http.*`` (a proxy, ``sslVerify``, a
URL-specific key), ``include.*``/``includeIf.*``, ``credential.*``, ``remote.*.proxy``.
Refusing (rather than pushing from a bare repository Legio owns) keeps one push path and
tells Caesar which key to remove. Tags and submodules are never pushed along
(``--no-follow-tags --no-recurse-submodules``: a ``push.followTags`` would push Caesar's
local tags).

``push`` refuses anything but ``refs/heads/legio/<agent>/…`` (``agents_branch``) and the
project's base branch; it never forces unless ``force`` (which the caller sets only after
Caesar confirmed it, and then for Legio's own branch alone). A rejection is a
``PushRejected`` with git's (and the forge's ``remote:``) own words, the token removed.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from legio.errors import ForgeError, PushRejected
from legio.fence.vault import REDACTED, redact
from legio.projects import gitsafe
from legio.projects.publishing import agents_branch

PUSH_TIMEOUT_S = 300.0
SCP = re.compile(r"(?:[A-Za-z0-9._-]+@)?([A-Za-z0-9.-]+):(?!//)(.+)")
OWNER_NAME = re.compile(r"/*([A-Za-z0-9][A-Za-z0-9-]{0,38})/([A-Za-z0-9._-]{1,100}?)(?:\.git)?/*")
# the pipe read by its path: dash reads only one-digit descriptors in ``<&N``
# it answers only for ``protocol=<scheme>`` and ``host=<host[:port]>`` (filled in by
# ``helper``), the only ones of the push's target
HELPER = (
    '!f() { test "$1" = get || exit 0; p=; h=; '
    'while IFS= read -r l; do test -z "$l" && break; case "$l" in '
    'protocol=*) p="${l#protocol=}";; host=*) h="${l#host=}";; esac; done; '
    'cat >/dev/null; test "$p" = "%(scheme)s" && test "$h" = "%(host)s" || exit 0; '
    "printf 'username=x-access-token\\npassword='; cat /dev/fd/%(fd)d; printf '\\n'; }; f"
)
HOST = re.compile(r"[A-Za-z0-9.-]+(?::[0-9]{1,5})?")
# the project's config keys that could send the push or the token elsewhere
RISKY = re.compile(
    r"url\..*\.(?:push)?insteadof|http\..*|include\..*|includeif\..*|credential\..*"
    r"|remote\..*\.proxy"
)


def helper(url: str, fd: int) -> tuple[str, str]:
    """The config key and value of the credential helper for ``url``'s scheme and host
    alone, reading the token from descriptor ``fd``."""
    parts = urlsplit(url)
    host = parts.netloc.lower()
    if parts.scheme not in ("https", "http") or not HOST.fullmatch(host):
        raise ForgeError("publishing", f"the push URL {redact(url)!r} has no plain host")
    value = HELPER % {"scheme": parts.scheme, "host": host, "fd": fd}
    return f"credential.{parts.scheme}://{host}.helper", value


async def check_config(repo: Path) -> None:
    """``ForgeError`` naming the first key of the project's own config (local and
    worktree; includes not followed) that could send a push or the token elsewhere."""
    code, out, err = await gitsafe.run_raw(
        repo,
        "config",
        "--no-includes",
        "--show-scope",
        "--name-only",
        "--list",
        hostile=False,
        work_tree=False,
    )
    if code != 0:
        raise ForgeError("publishing", f"could not read the project's git config: {err[:300]}")
    for line in out.decode(errors="replace").splitlines():
        scope, _, key = line.partition("\t")
        if scope == "command":  # Legio's own settings for this command
            continue
        if RISKY.fullmatch(key.lower()):
            raise ForgeError(
                "publishing",
                f"the project's git config sets {key!r}, which could send the push or the "
                f"forge token elsewhere: not pushed (remove it: git config --unset-all {key}, "
                "or move it out of the project's .git/config)",
            )


@dataclass(frozen=True)
class PushRemote:
    """Where a push goes: the URL git gets, and whether the token goes with it."""

    url: str
    token: bool  # https to the forge's host
    local: bool  # a path or file:// (the file transport)


def repo_of_url(url: str) -> str:
    """``owner/name`` from a remote URL (https, ssh://, git@host:owner/name.git); ""."""
    url = url.strip()
    scp = SCP.fullmatch(url)
    path = scp.group(2) if scp and "://" not in url else urlsplit(url).path
    match = OWNER_NAME.fullmatch(path)
    return f"{match.group(1)}/{match.group(2)}" if match else ""


async def remote_url(repo: Path, remote: str) -> str:
    """The push URL of ``remote`` in the project (``pushurl``, else ``url``); ""."""
    for key in (f"remote.{remote}.pushurl", f"remote.{remote}.url"):
        out = await gitsafe.run(
            repo, "config", "--get", key, hostile=False, work_tree=False, check=False
        )
        if out.strip():
            return out.strip().splitlines()[0]
    return ""


def push_target(url: str, web_host: str, repo_name: str) -> PushRemote:
    """How to push to ``url`` (see the module docstring); ``ForgeError`` when Legio won't."""
    if url.startswith("file://") or url.startswith("/"):
        return PushRemote(url, token=False, local=True)
    parts = urlsplit(url)
    scp = SCP.fullmatch(url) if "://" not in url else None
    host = (scp.group(1) if scp else parts.hostname or "").lower()
    if host != web_host.lower():
        raise ForgeError(
            "publishing",
            f"the remote's URL {redact(url)!r} is not on the forge ({web_host}): Legio pushes "
            "only to its forge (set [projects.<name>] remote to the forge's remote)",
        )
    if parts.scheme == "https" and not parts.username and not parts.password:
        return PushRemote(url, token=True, local=False)
    if parts.scheme in ("", "ssh", "git+ssh") and repo_name:
        return PushRemote(f"https://{web_host}/{repo_name}.git", token=True, local=False)
    raise ForgeError(
        "publishing",
        f"the remote's URL {redact(url)!r} is not https (Legio sends the token over TLS only, "
        "and never a URL with a password in it)",
    )


async def _transport(
    repo: Path, target: PushRemote, token: str, what: str
) -> tuple[list[tuple[str, str]], list[int], int]:
    """The settings, inherited descriptors and the pipe's read end (-1: none) for git to
    reach ``target``: the file transport, or https with the token through the helper."""
    settings: list[tuple[str, str]] = []
    fds: list[int] = []
    read = -1
    if target.local:
        settings.append(("protocol.file.allow", "always"))
    else:
        scheme = urlsplit(target.url).scheme  # https (push_target allows nothing else)
        settings += [(f"protocol.{scheme}.allow", "always"), ("http.followRedirects", "false")]
        if target.token:
            if not token:
                raise ForgeError(
                    what, "no forge token: set [forge] token_env's variable and restart"
                )
            await check_config(repo)
            read, write = os.pipe()
            os.write(write, token.encode())
            os.close(write)
            fds.append(read)
            settings += [("credential.helper", ""), helper(target.url, read)]
    return settings, fds, read


async def _reach(
    repo: Path,
    target: PushRemote,
    token: str,
    what: str,
    args: list[str],
    extra: Sequence[tuple[str, str]] = (),
) -> tuple[int, bytes, str]:
    """Run git ``args`` in ``repo`` reaching ``target`` (``_transport``: the token, if
    any, through a pipe the credential helper reads), the pipe closed whatever happens."""
    settings, fds, read = await _transport(repo, target, token, what)
    try:
        return await gitsafe.run_raw(
            repo,
            *args,
            hostile=False,
            work_tree=False,
            limit_s=PUSH_TIMEOUT_S,
            settings=settings + list(extra),
            pass_fds=fds,
        )
    finally:
        if read >= 0:
            with contextlib.suppress(OSError):
                os.close(read)


async def fetch_base(repo: Path, target: PushRemote, base: str, token: str) -> str:
    """The forge's ``base`` branch fetched into the project as ``refs/legio/base/<base>``
    (Legio's own ref: Caesar's branches untouched); the commit it names now."""
    ref = f"refs/legio/base/{base}"
    args = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-auto-maintenance"]
    args += ["--no-recurse-submodules", "--", target.url, f"+refs/heads/{base}:{ref}"]
    code, _, err = await _reach(repo, target, token, "fetching the merged base", args)
    if code != 0:
        said = redact(err).replace(token, REDACTED) if token else redact(err)
        raise ForgeError("fetching the merged base", said[:500] or f"exit code {code}")
    out = await gitsafe.run(
        repo, "rev-parse", "--verify", "--quiet", ref, hostile=False, work_tree=False, check=False
    )
    return out.strip()


def _reason(stdout: str, stderr: str) -> str:
    """git's own words about a refused push: the ``!`` lines and ``remote:``/``error:``s."""
    lines = [line.split("\t")[-1].strip() for line in stdout.splitlines() if line.startswith("!")]
    for line in stderr.splitlines():
        line = line.strip()
        if line.startswith(("remote:", "error:", "fatal:", "! [")) and line not in lines:
            text = line.removeprefix("remote:").strip()
            if text and not text.startswith("error: failed to push some refs"):
                lines.append(text)
    return "; ".join(dict.fromkeys(lines))[:1000] or "git push failed"


async def push(
    repo: Path,
    target: PushRemote,
    branch: str,
    agent: str,
    base: str,
    commit: str,
    token: str,
    *,
    force: bool = False,
) -> bool:
    """Push ``commit`` to ``refs/heads/<branch>`` of ``target``; whether it moved the
    branch (False: it was there already). ``PushRejected`` (``non_fast_forward`` set when
    a force would do) or ``ForgeError`` otherwise."""
    if not agents_branch(branch, agent) or branch == base:
        raise ForgeError("publishing", f"{branch!r} is not Legio's branch of {agent}: not pushed")
    spec = f"{'+' if force else ''}{commit}:refs/heads/{branch}"
    args = ["push", "--porcelain", "--no-verify", "--no-signed", "--no-follow-tags"]
    args += ["--no-recurse-submodules", "--", target.url, spec]
    extra = [("push.default", "nothing"), ("push.gpgSign", "false")]
    code, out, err = await _reach(repo, target, token, "publishing", args, extra)
    text = out.decode(errors="replace")
    clean = redact(text).replace(token, REDACTED) if token else redact(text)
    errors = redact(err).replace(token, REDACTED) if token else redact(err)
    if code != 0:
        reason = _reason(clean, errors)
        rejected = "non-fast-forward" in reason or "fetch first" in reason
        raise PushRejected(f"pushing {branch}", reason, non_fast_forward=rejected)
    return "[up to date]" not in clean
