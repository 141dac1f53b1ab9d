"""An agent's folders, checked for every message: its workspace and the granted ones.

``granted_dirs`` resolves frontmatter ``add_dirs`` (absolute, existing, outside the
castra, neither holding nor inside a configured project: an agent granted it could write
the project's ``.git/config``, which Legio's pushes read) after ``workspace_problem``
has made sure the workspace (frontmatter ``cwd``) neither holds the castra nor sits in
a place ``legio.fence.policy.protected_entries`` protects. ``policy_problems`` lists
every agent's problems (start-up, ``legio check``).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from legio.castra import AgentPrompt, Castra
from legio.config import Config
from legio.errors import CastraError, LegioError
from legio.fence.policy import _within, identity, protected_entries, working_dir


def granted_dirs(castra: Castra, prompt: AgentPrompt, config: Config) -> list[Path]:
    """The folders frontmatter ``add_dirs`` grants, resolved; ``CastraError`` if one is
    not absolute, does not exist, contains (or is inside) the castra or one of the
    config's projects, or if the agent's workspace itself is unusable
    (``workspace_problem``)."""
    problem = workspace_problem(castra, prompt, None)
    if problem:
        raise CastraError(problem)
    root = castra.root.resolve()
    granted = []
    for raw in prompt.settings.add_dirs:
        path = Path(os.path.expanduser(raw))
        where = f"{prompt.path}: add_dirs {raw!r}"
        if not path.is_absolute():
            raise CastraError(f"{where} is not an absolute path; write e.g. ~/code/myapp")
        path = path.resolve()
        if _within(root, path) or _within(path, root):
            raise CastraError(
                f"{where} {'contains' if _within(root, path) else 'is inside'} Legio's castra "
                f"({root}); grant a folder outside it (its own workspace is writable already)"
            )
        for name, project in config.projects.items():
            repo = Path(os.path.expanduser(project.path)).resolve()
            if _within(repo, path) or _within(path, repo):
                raise CastraError(
                    f"{where} {'contains' if _within(repo, path) else 'is inside'} project "
                    f"{name}'s repository ({repo}): an agent there could rewrite the project's "
                    "git config; agents work on projects in their own copies (frontmatter "
                    "project), so grant a folder outside it"
                )
        if not path.is_dir():
            raise CastraError(f"{where}: {path} is not an existing folder; create it or remove it")
        granted.append(path)
    return granted


# workspace_problem's verdicts, by everything they depend on that can change between
# messages; checked anew (about 0.5 ms: every protected path resolved) when any differs.
_WORKSPACE_VERDICTS: dict[tuple[object, ...], str | None] = {}
_WORKSPACE_VERDICTS_MAX = 256


def workspace_problem(castra: Castra, prompt: AgentPrompt, config_path: Path | None) -> str | None:
    """Why this agent's workspace (frontmatter ``cwd``) cannot be used, or None.

    Asked for every message. The verdict is remembered under the resolved workspace,
    the (device, inode) of it and each of its parents, the castra's centurio folders
    and the variables that place the CLI config: a folder moved, replaced or linked
    elsewhere, a new centurio, an edited ``cwd`` each make a new key, so a new check.
    """
    workspace = working_dir(castra, prompt, create=False)
    identities = tuple(identity(p) for p in (workspace, *workspace.parents))  # stat once
    key = (
        castra.root,
        prompt.path,
        prompt.settings.cwd,
        config_path,
        workspace,
        identities,
        _entry_names(castra.centuriones_dir),
        os.environ.get("HOME"),
        os.environ.get("CLAUDE_CONFIG_DIR"),
    )
    if key in _WORKSPACE_VERDICTS:
        return _WORKSPACE_VERDICTS[key]
    verdict = _check_workspace(castra, prompt, config_path, workspace, list(identities))
    if len(_WORKSPACE_VERDICTS) >= _WORKSPACE_VERDICTS_MAX:
        _WORKSPACE_VERDICTS.clear()
    _WORKSPACE_VERDICTS[key] = verdict
    return verdict


def _entry_names(folder: Path) -> tuple[str, ...] | None:
    try:
        return tuple(sorted(entry.name for entry in os.scandir(folder)))
    except OSError:
        return None


def _check_workspace(
    castra: Castra,
    prompt: AgentPrompt,
    config_path: Path | None,
    workspace: Path,
    identities: list[tuple[int, int] | None],
) -> str | None:
    root = castra.root.resolve()
    where = f"{prompt.path}: cwd {str(prompt.settings.cwd)!r}"
    if _within(root, workspace):
        return (
            f"{where} contains Legio's castra ({root}); use a folder inside the agent's "
            "own folder or outside the castra"
        )
    for entry in protected_entries(castra, prompt.name, config_path):
        if not entry.write and entry.covers(workspace, identities=identities):
            return f"{where} points into a protected place ({entry.reason})"
    return None


def policy_problems(config: Config, castra: Castra) -> list[str]:
    """What in the prompts' frontmatter makes an agent's policy unusable (start-up, check)."""
    problems = []
    prompts: list[AgentPrompt] = []
    with contextlib.suppress(LegioError):
        prompts.append(castra.read_legatus())
    prompts += list(castra.roster().centuriones.values())
    for prompt in prompts:
        try:
            granted_dirs(castra, prompt, config)
        except CastraError as e:
            problems.append(str(e))
    return problems
