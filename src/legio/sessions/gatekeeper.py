"""The approval gate: tool calls under an ask rule wait for Caesar; his grants are kept.

Mechanism (PROTOCOLS.md, "Approvals, questions, budget and plan limits"): the agents
keep ``bypassPermissions``; a second ``PreToolUse`` hook, beside the path guard,
answers ``ask`` for a call that matches an ask rule (``legio.shell.rules``) and is not
granted yet; the CLI then calls ``can_use_tool``, which asks Caesar through the
front-end's ``Asker`` and answers allow or deny. A call the path guard refuses is
denied by this hook too (one verdict: an approval never widens the guard, and no call runs
because one hook trusted the other); a hook that cannot check a call denies it. A line the
CLI could run without calling ``can_use_tool`` (``legio.shell.rules.unaskable``) is denied,
with a reason telling the agent how to split it so that Caesar is asked.

Legio remembers grants itself ("for this session": per SDK session id, in memory;
"always": per agent and rule, in the praetorium), because the CLI's own
``updated_permissions`` do not silence a hook's ``ask``. No answer within
``[approvals] timeout`` counts as Deny; a cancelled turn (``/stop``, ``/reset``,
shutdown) cancels the wait and the request is recorded as cancelled. The CLI's
``AskUserQuestion`` arrives here too: the questions go to Caesar, his answers back.
So does ``ExitPlanMode`` of a ``/plan`` turn (PROTOCOLS.md, "Plan mode"): the plan is
asked as a question with ✅ Go (allow: the CLI leaves plan mode and carries it out),
✏️ Change (his own words instead deny with them as the changes) and ✖ Drop (deny and
stop the turn; no answer in time counts as Drop); each plan is stored first as the agent's
nuntius (``legio.sessions.planning``), and the one he agreed to is its turn's plan.
Until he taps Go, both callbacks refuse what a plan turn may not do, and the plan is read
from its file by Legio itself, never through a link (``legio.sessions.planfence``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from legio.config import Config
from legio.fence.guard import PathGuard
from legio.request import ApprovalRequest, Asker, Decision, QuestionRequest, Status, Watch
from legio.sessions.planfence import plan_text, refusal
from legio.sessions.planning import Planning
from legio.shell.rules import (
    Rule,
    exact_grant,
    matching,
    opaque_reason,
    parse_rules,
    shorten,
    unaskable,
)
from legio.store.grants import ApprovalStore, Grant
from legio.visible import visible

if TYPE_CHECKING:  # the SDK (and mcp) is imported when the first CLI starts
    from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny, ToolPermissionContext

logger = logging.getLogger(__name__)

QUESTION_TOOL = "AskUserQuestion"
PLAN_TOOL = "ExitPlanMode"
GO, CHANGE, DROP = "✅ Go", "✏️ Change", "✖ Drop"
# The plan file is written in .plans/ of the agent's working directory (or copy); when
# that write failed (a path guard refusal), ExitPlanMode comes without the plan's text.
NO_PLAN = "(no plan text reached Legio: see {agent}'s message above)"
HookCallback = Callable[[Any, str | None, Any], Awaitable[dict[str, Any]]]
PermissionResult: TypeAlias = "PermissionResultAllow | PermissionResultDeny"
CanUseTool = Callable[[str, dict[str, Any], "ToolPermissionContext"], Awaitable[PermissionResult]]


def deny(reason: str) -> dict[str, Any]:
    """A ``PreToolUse`` answer that refuses the call with ``reason``."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


UNASKABLE = (
    "Legio refuses this line: it needs Caesar's approval and {why} (a configuration file, "
    "or files written while pointing git elsewhere), and the Claude CLI can run such a line "
    "without asking him. Write files in one call and run the command in another call; "
    "then he is asked."
)


def call_target(tool: str, tool_input: dict[str, Any]) -> str:
    """What a call is about: the command, path, URL or query; else its input as JSON."""
    for key in ("command", "file_path", "notebook_path", "url", "path", "query", "pattern"):
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return value
    return json.dumps(tool_input, ensure_ascii=False, sort_keys=True)


async def notify(watch: Watch | None, status: Status) -> None:
    """Show a status; its failure never fails the wait."""
    if watch is not None:
        try:
            await watch.status(status)
        except Exception:
            logger.exception("status callback failed (ignored)")


class Gatekeeper:
    """Every agent's approval rules, grants and waiting requests; see the module docstring."""

    def __init__(self, config: Config, store: ApprovalStore | None = None) -> None:
        self.rules = parse_rules(config.approvals.ask)
        self.timeout_s = config.approvals.timeout * 60
        self.store = store
        self.standing: Callable[[], Asker | None] = lambda: None  # the front-ends' asker
        self.watch_of: Callable[[str], Watch | None] = lambda name: None  # its running turn's
        self.planning: Planning | None = None  # where plans are stored (SessionManager's)
        self._session_grants: dict[tuple[str, str], set[str]] = {}
        self._always: dict[str, set[str]] = {}
        self._asked: dict[str, tuple[str, tuple[str, ...]]] = {}  # tool_use_id → session, rules
        self._next_id = 0

    def asker_for(self, agent: str) -> Asker | None:
        """Who asks Caesar for ``agent``: its running request's watch, else the front-end's."""
        watch = self.watch_of(agent)
        return (watch.asker() if watch is not None else None) or self.standing()

    async def load(self) -> int:
        """Read the "always" grants; expire requests an earlier run left pending."""
        if self.store is None:
            return 0
        expired = await self.store.expire_pending()
        for grant in await self.store.grants():
            self._always.setdefault(grant.agent, set()).add(grant.rule)
        if expired:
            logger.info("%d approval request(s) of an earlier run expired", expired)
        return expired

    # ---------------------------------------------------------- grants

    def agent_rules(self, extra: tuple[str, ...] | list[str] = ()) -> list[Rule]:
        """The legion's rules plus an agent's own (its frontmatter ``ask``)."""
        return [*self.rules, *parse_rules(extra)]

    def pending(
        self, agent: str, session_id: str, rules: list[Rule], tool: str, tool_input: dict[str, Any]
    ) -> list[Rule]:
        """The rules this call falls under that Caesar has not granted. A command that
        cannot be read word by word falls under every Bash rule, and only a grant of
        exactly that command (``Bash(exactly: …)``) covers it."""
        granted = self._always.get(agent, set()) | self._session_grants.get(
            (agent, session_id), set()
        )
        matched = matching(rules, tool, tool_input)
        if matched and opaque_reason(tool, tool_input):
            exact = exact_grant(tool_input)
            return [] if exact in granted else [Rule(exact, "Bash", exact)]
        return [r for r in matched if r.text not in granted]

    async def grants(self) -> list[Grant]:
        return await self.store.grants() if self.store else []

    async def revoke(self, grant_id: int) -> Grant | None:
        """End an "always" grant; the grant, or None if there is none with that id."""
        if self.store is None:
            return None
        grant = await self.store.revoke(grant_id)
        if grant is not None:
            self._always.get(grant.agent, set()).discard(grant.rule)
        return grant

    async def _remember(
        self, decision: Decision, agent: str, session: str, rules: tuple[str, ...]
    ) -> None:
        if decision.choice == "session":
            self._session_grants.setdefault((agent, session), set()).update(rules)
        elif decision.choice == "always":
            self._always.setdefault(agent, set()).update(rules)
            if self.store is not None:
                for rule in rules:
                    await self.store.add_grant(agent, rule)

    # ---------------------------------------------------------- the SDK's callbacks

    def planning_refusal(
        self, agent: str, plans: Path | None, tool: str, tool_input: dict[str, Any]
    ) -> str:
        """Why ``agent``'s running plan turn may not make this call ("": it may, or no plan
        turn runs or Caesar approved its plan); ``plans``: its ``.plans`` folder."""
        if self.planning is None or not self.planning.planning(agent):
            return ""
        return refusal(plans, tool, tool_input)

    def hook(
        self, agent: str, rules: list[Rule], guard: PathGuard | None, plans: Path | None = None
    ) -> HookCallback:
        """A ``PreToolUse`` hook: ``ask`` for a matching call nobody granted; in a plan
        turn, deny what may change something (``plans``: its ``.plans`` folder)."""

        async def pre_tool_use(
            hook_input: Any, tool_use_id: str | None, context: Any
        ) -> dict[str, Any]:
            tool = str(hook_input.get("tool_name", ""))
            tool_input = hook_input.get("tool_input") or {}
            session = str(hook_input.get("session_id") or "")
            try:  # one verdict: what the path guard refuses, this hook denies too
                refused = guard.check(tool, tool_input, hook_input.get("cwd")) if guard else None
                planning = self.planning_refusal(agent, plans, tool, tool_input)
                needed = [] if refused else self.pending(agent, session, rules, tool, tool_input)
                unsafe = unaskable(tool, tool_input) if needed else ""
            except Exception:  # fail closed: a call the hook cannot check does not run
                logger.exception("%s: the approval rules could not check %s", agent, tool)
                return deny("Legio could not check this call, so it is refused")
            if refused:
                logger.debug("%s: ask hook: deny %s (the path guard: %s)", agent, tool, refused)
                return deny(f"Legio's policy: {refused}.")
            if planning:
                logger.info("%s: ask hook: deny %s (a plan turn)", agent, tool)
                return deny(planning)
            if not needed:
                logger.debug("%s: ask hook: nothing to ask for %s", agent, tool)
                return {}
            if unsafe:
                logger.debug("%s: ask hook: deny %s (cannot be asked: %s)", agent, tool, unsafe)
                return deny(UNASKABLE.format(why=unsafe))
            texts = tuple(r.text for r in needed)
            logger.debug("%s: ask hook: ask about %s (%s)", agent, tool, ", ".join(texts))
            if tool_use_id:
                self._asked[tool_use_id] = (session, texts)
            return {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "ask",
                    "permissionDecisionReason": f"Legio asks Caesar first ({', '.join(texts)})",
                }
            }

        return pre_tool_use

    def can_use_tool(
        self, agent: str, rules: list[Rule] | None = None, plans: Path | None = None
    ) -> CanUseTool:
        """The ``can_use_tool`` callback of agent ``agent``'s sessions (built with its
        options, once the SDK is loaded: ``legio.sessions.opening.load_sdk``; ``plans``:
        its working directory's ``.plans`` folder, where a plan turn writes its plan)."""
        from claude_agent_sdk import (
            CanUseToolShadowedWarning,
            PermissionResultAllow,
            PermissionResultDeny,
        )

        # The SDK warns that bypassPermissions shadows can_use_tool; with a hook that
        # answers "ask" it does not (PROTOCOLS.md): the warning would only mislead.
        warnings.filterwarnings("ignore", category=CanUseToolShadowedWarning)

        async def decide(
            tool: str, tool_input: dict[str, Any], context: ToolPermissionContext
        ) -> PermissionResult:
            if tool == QUESTION_TOOL:
                return await self._question(agent, tool_input)
            if tool == PLAN_TOOL:
                return await self._plan(agent, tool_input, plans)
            planning = self.planning_refusal(agent, plans, tool, tool_input)
            if planning:
                return PermissionResultDeny(message=planning)
            asked = self._asked.pop(context.tool_use_id or "", None)
            if asked is None:  # not our hook's ask (another permission mode): check anew
                needed = self.pending(agent, "", rules or self.rules, tool, tool_input)
                if not needed:
                    return PermissionResultAllow()
                asked = ("", tuple(r.text for r in needed))
            session, texts = asked
            return await self._approval(agent, session, texts, tool, tool_input, context)

        return decide

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def _approval(
        self,
        agent: str,
        session: str,
        rules: tuple[str, ...],
        tool: str,
        tool_input: dict[str, Any],
        context: ToolPermissionContext,
    ) -> PermissionResult:
        from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

        # What runs, never the agent's own words about it: a description ("print the date,
        # read-only") is shown beside the command, marked as the agent's.
        target = call_target(tool, tool_input)
        said = tool_input.get("description")
        description = context.description or (said if isinstance(said, str) else "")
        request = ApprovalRequest(
            id=0,
            agent=agent,
            tool=context.display_name or tool,
            target=shorten(target),
            rules=rules,
            reason=context.decision_reason or "",
            timeout_s=self.timeout_s,
            full_target=target,
            opaque=opaque_reason(tool, tool_input),
            description=description if description.strip() != target.strip() else "",
        )
        asker = self.asker_for(agent)
        if asker is None:
            logger.warning("%s: %s needs Caesar's approval, but no front-end asks", agent, tool)
            return PermissionResultDeny(
                message="This call needs Caesar's approval and nobody can ask him now; "
                "do not do it. Tell Caesar what you wanted to do."
            )
        request.id = (
            await self.store.open_request(agent, tool, target) if self.store else self._new_id()
        )
        await notify(self.watch_of(agent), Status(agent, "approval", tool, shorten(target, 60)))
        decision = await self._wait(request, asker.approve(request))
        logger.info("%s: %s on %r: %s", agent, tool, request.target[:80], request.outcome)
        if decision is None:
            minutes = f"{self.timeout_s / 60:g}"
            return PermissionResultDeny(
                message=f"Caesar did not answer within {minutes} minutes, so this is denied. "
                "Do not try it another way; tell him what you wanted to do."
            )
        await self._remember(decision, agent, session, rules)
        if decision.choice in ("once", "session", "always"):
            return PermissionResultAllow()
        if decision.choice == "stop":
            return PermissionResultDeny(
                message="Caesar denied this and stopped the turn.", interrupt=True
            )
        said = f" His reason: {decision.reason}" if decision.reason.strip() else ""
        return PermissionResultDeny(
            message=f"Caesar denied this call.{said} Do not try it another way."
        )

    async def confirm(self, agent: str, tool: str, what: str, rule: str) -> bool:
        """Ask Caesar once about an action Legio's own tool would take for ``agent`` (a
        write to the forge): ``what`` is exactly what it would do. True only for an Allow
        given now (no grant is kept: the next one asks again); no front-end, no answer in
        time, Deny or Stop: False."""
        asker = self.asker_for(agent)
        if asker is None:
            logger.warning("%s: %s needs Caesar's approval, but no front-end asks", agent, tool)
            return False
        request = ApprovalRequest(
            id=0,
            agent=agent,
            tool=tool,
            target=shorten(what),
            rules=(rule,),
            timeout_s=self.timeout_s,
            full_target=what,
        )
        request.id = await self.store.open_request(agent, tool, what) if self.store else 0
        request.id = request.id or self._new_id()
        await notify(self.watch_of(agent), Status(agent, "approval", tool, shorten(what, 60)))
        decision = await self._wait(request, asker.approve(request))
        logger.info("%s: %s: %s", agent, tool, request.outcome)
        return decision is not None and decision.choice in ("once", "session", "always")

    async def _wait(
        self, request: ApprovalRequest | QuestionRequest, answer: Awaitable[Any]
    ) -> Any:
        """Caesar's answer, or None after the timeout; a cancellation is recorded and raised."""
        task = asyncio.ensure_future(answer)
        try:
            done, _ = await asyncio.wait({task}, timeout=request.timeout_s)
        except asyncio.CancelledError:
            request.outcome = "cancelled"
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await self._close(request)
            raise
        if not done:
            request.outcome = "timeout"
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await self._close(request)
            return None
        try:
            result = task.result()
        except Exception:
            logger.exception("%s: asking Caesar failed; denying", request.agent)
            request.outcome = "timeout" if isinstance(request, ApprovalRequest) else "failed"
            await self._close(request)
            return None
        if isinstance(request, ApprovalRequest):
            request.outcome = result.choice
        else:
            request.outcome = "answered" if result else "unanswered"
        await self._close(request)
        return result

    async def _close(self, request: ApprovalRequest | QuestionRequest) -> None:
        if self.store is not None and isinstance(request, ApprovalRequest) and request.id:
            try:
                await self.store.close_request(request.id, str(request.outcome))
            except Exception:
                logger.exception("could not record approval request %s", request.id)

    async def _question(self, agent: str, tool_input: dict[str, Any]) -> PermissionResult:
        from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

        questions = [q for q in tool_input.get("questions") or [] if isinstance(q, dict)]
        asker = self.asker_for(agent)
        if asker is None or not questions:
            return PermissionResultDeny(message="Caesar cannot be asked right now.")
        request = QuestionRequest(self._new_id(), agent, questions, self.timeout_s)
        await notify(self.watch_of(agent), Status(agent, "question"))
        answers = await self._wait(request, asker.answer(request))
        if not answers:
            return PermissionResultDeny(message="Caesar did not answer your question.")
        return PermissionResultAllow(updated_input={**tool_input, "answers": dict(answers)})

    async def _plan(
        self, agent: str, tool_input: dict[str, Any], plans: Path | None = None
    ) -> PermissionResult:
        """A /plan turn's plan, for Caesar to approve (see the module docstring)."""
        from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

        plan, refused = plan_text(tool_input, plans)
        if refused:
            return PermissionResultDeny(message=refused)
        shown = visible(plan.strip()) or NO_PLAN.format(agent=agent)
        asker = self.asker_for(agent)
        if asker is None:
            return PermissionResultDeny(
                message="Caesar cannot be asked about your plan now; change nothing and "
                "tell him your plan waits.",
                interrupt=True,
            )
        options = [
            {"label": GO, "description": "carry it out"},
            {"label": CHANGE, "description": "write your changes instead of tapping"},
            {"label": DROP, "description": "stop here, change nothing"},
        ]
        text = f"📋 {agent}'s plan:\n\n{shown}"
        seq = await self.planning.record(agent, text) if self.planning is not None else None
        question = {"question": text, "header": "Plan", "options": options}
        request = QuestionRequest(
            self._new_id(), agent, [question], self.timeout_s, plan=True, seq=seq
        )
        await notify(self.watch_of(agent), Status(agent, "question", note="plan"))
        answers = await self._wait(request, asker.answer(request))
        answer = next(iter(answers.values()), "").strip() if answers else ""
        logger.info("%s: its plan: %s", agent, answer[:80] or "no answer")
        if answer == GO:
            _, refused = plan_text({}, plans)  # no link left for the CLI to follow
            if refused:
                return PermissionResultDeny(message=refused)
            if self.planning is not None:
                self.planning.agree(agent, seq)  # it may act now; its turn's card links to it
            # the CLI gives the model (and writes to the plan file) what Caesar approved
            return PermissionResultAllow(updated_input={**tool_input, "plan": plan or shown})
        if answer in ("", DROP):
            return PermissionResultDeny(message="Caesar dropped this plan.", interrupt=True)
        if answer == CHANGE:
            return PermissionResultDeny(
                message="Caesar wants this plan changed but did not say how yet: ask him "
                "what to change, and change nothing."
            )
        return PermissionResultDeny(
            message=f"Caesar wants this plan changed: {answer}\nRevise the plan and "
            "propose it again with ExitPlanMode."
        )
