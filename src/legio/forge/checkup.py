"""``legio check``'s forge lines: the token verified with one read (``GET /user``) and each
project's repository with one more, each problem named with its fix."""

from __future__ import annotations

from legio.config import Config
from legio.errors import ForgeError, LegioError
from legio.fence.vault import forge_token
from legio.forge.github import GitHub
from legio.forge.publish import repo_name

Line = tuple[str, str]


async def check_forge(config: Config) -> list[Line]:
    """(mark, text) lines about ``[forge]`` and the projects' repositories on it."""
    if config.forge is None:
        return [("ok", "forge: none ([forge] not set: no Publish, CI or issues)")]
    settings = config.forge
    token = forge_token(config)
    if not token:
        return [
            (
                "bad",
                f"forge: ${settings.token_env} is not set: create a token for the forge "
                "(contents and pull requests: write; issues, checks, actions: read) and "
                f"`export {settings.token_env}=<token>`",
            )
        ]
    github = GitHub(settings.api_url, token, retries=1, backoff_s=0.5)
    try:
        try:
            login = await github.whoami()
        except ForgeError as e:
            fix = " (a wrong or expired token?)" if e.status == 401 else ""
            return [("bad", f"forge: {settings.api_url}: {e.reason}{fix}")]
        lines: list[Line] = [
            ("ok", f"forge: {settings.api_url}, the token of {login} (${settings.token_env})")
        ]
        for project in sorted(config.projects):
            lines.append(await _project_line(github, config, project))
        return lines
    finally:
        await github.close()


async def _project_line(github: GitHub, config: Config, project: str) -> Line:
    try:
        repo = await repo_name(config.projects[project], project)
    except LegioError as e:
        return ("bad", f"project #{project} on the forge: {e}")
    try:
        info = await github.repo(repo)
    except ForgeError as e:
        fix = (
            f" (no such repository, or the token cannot see it; set [projects.{project}] repo)"
            if e.status == 404
            else ""
        )
        return ("bad", f"project #{project} on the forge: {repo}: {e.reason}{fix}")
    push = "" if info.can_push else "; the token may not push there"
    return ("ok", f"project #{project} on the forge: {info.full_name} ({info.url}{push})")
