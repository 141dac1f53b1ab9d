"""↩️ Undo, ``/undo`` and 🔀 Try again: a work card's turn taken back, kept, or asked again.

``ask`` says what undoing card ``n`` would do, or why it will not: the agent is working in
that copy (``/stop`` it first), the copy is gone or on another branch, or the branch moved
since the card (a newer turn that was not undone: undo that first). When the branch is on
the forge (a pull request Legio opened for it), the front-end asks a second time, naming
the pull request; ``undo`` refuses without that confirmation. Undo keeps the turn's
commits and the copy's uncommitted work under ``refs/legio/undo/<agent>/<card>`` in the
project for ``KEEP_DAYS`` (a second keep of the same card, a Try again after its undo,
under ``…/<card>-2``: one never overwrites another; ``/undo 7-2`` brings that one back;
``legio.projects.undoing``), then puts the copy and the branch back at the turn's start;
nothing is pushed (the pull request shows the old commits until
the next Publish, which asks before it force-pushes). ``kept`` lists what is kept (pruned
first), ``restore`` brings one back when the branch is still where the undo left it and
the copy holds no new uncommitted work. ``again`` keeps the copy's uncommitted work the
same way, starts ``legio/<agent>/try-<n>`` at the turn's start and returns the turn's
request (Caesar's own words, as recorded) for the agent to answer on it, on the model
Caesar picked: ``model`` a [models] name, or None for the model that turn was asked on
(its ``@vorenus:opus``; else the agent's own). ``models`` is what it offers.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

from legio.errors import ProjectError
from legio.projects import undoing
from legio.projects.branchwork import tip_of
from legio.projects.checks import Checks
from legio.projects.copies import Place, Projects
from legio.projects.turnwork import uncommitted
from legio.projects.undoing import KEEP_DAYS, Kept
from legio.request import Request
from legio.sessions.manager import SessionManager
from legio.sessions.pointers import nuntius_at
from legio.store.cardstore import CardRow
from legio.store.praetorium import Nuntius
from legio.store.pullstore import PullStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class UndoAsk:
    """What undoing a card would do (``refusal``: why it will not)."""

    card: int
    agent: str
    project: str
    branch: str
    commits: int = 0
    uncommitted: int = 0
    published: str = ""  # "pull request #3 (url)": the branch is on the forge
    refusal: str = ""


class TurnBack:
    """See the module docstring."""

    def __init__(
        self, sessions: SessionManager, pulls: PullStore, checks: Checks | None = None
    ) -> None:
        self.sessions = sessions
        self.projects = sessions.projects
        self.cards = sessions.praetorium.cards
        self.pulls = pulls
        self.checks = checks

    def _max_mb(self) -> float:
        return self.projects.config.project_options.max_publish_mb

    async def _row(self, card_id: int) -> CardRow:
        row = await self.cards.get(card_id)
        if row is None:
            raise ProjectError(f"There is no card {card_id}.")
        return row

    async def _place(self, row: CardRow) -> Place:
        """The card's copy, checked: not being worked in, there."""
        slot = self.sessions.slot(row.agent)
        copy = self.projects.copy_dir(row.agent, row.project)
        if slot.session is not None and slot.session.cwd == copy and slot.state == "working":
            raise ProjectError(
                f"{row.agent} is working in its copy of #{row.project} now: "
                f"/stop {row.agent} first, or wait for its answer."
            )
        if not copy.exists():
            raise ProjectError(
                f"{row.agent}'s copy of #{row.project} was dropped since card {row.id}: "
                "there is nothing to put back."
            )
        return await self.projects.place(row.agent, row.project)

    async def ask(self, card_id: int) -> UndoAsk:
        """What ↩️ Undo on card ``card_id`` would do; its ``refusal`` if it will not."""
        try:
            row = await self._row(card_id)
        except ProjectError as e:
            return UndoAsk(card_id, "", "", "", refusal=str(e))
        asked = UndoAsk(row.id, row.agent, row.project, row.branch, row.commits, row.uncommitted)
        try:
            place = await self._place(row)
            await self._unmoved(row, place)
        except ProjectError as e:
            return replace(asked, refusal=str(e))
        record = await self.pulls.of(row.project, row.agent)
        if record is not None and record.branch == row.branch and record.state != "closed":
            published = f"pull request #{record.number} ({record.url})"
            return replace(asked, published=published)
        return asked

    async def _unmoved(self, row: CardRow, place: Place) -> None:
        """``ProjectError`` unless the copy is on the card's branch at the card's end."""
        if not row.from_tip:
            raise ProjectError(f"Card {row.id} does not record where its turn started.")
        if place.head != row.branch:
            raise ProjectError(
                f"{row.agent}'s copy of #{row.project} is on {place.head or 'no branch'} now, "
                f"not {row.branch}: not undone."
            )
        undone = {k.card for k in await undoing.kept(place.repo) if k.agent == row.agent}
        later = [n for n in await self.cards.newer(row.id, row.agent, row.project)]
        if [n for n in later if n not in undone]:
            raise ProjectError(
                f"Card {later[-1]} came after card {row.id} on {row.branch}: undo the newer "
                "turns first (newest first)."
            )
        tip = await tip_of(place.repo, row.branch) or row.from_tip  # "": never published
        if tip != row.to_tip or await undoing.head_tip(place) != row.to_tip:
            raise ProjectError(
                f"{row.branch} has moved since card {row.id} (it is at {tip[:12] or 'nothing'}, "
                f"the card ended at {row.to_tip[:12]}): not undone."
            )

    async def undo(self, card_id: int, *, confirmed: bool = False) -> str:
        """↩️ Undo: card ``card_id``'s turn kept and taken back; what was done, in a
        sentence. ``ProjectError`` with the reason when it will not (or when the branch
        is on the forge and ``confirmed`` is not set)."""
        row = await self._row(card_id)
        async with self.idle(row.agent):
            return await self._undo(row, confirmed)

    @contextlib.asynccontextmanager
    async def idle(self, agent: str) -> AsyncIterator[None]:
        """Hold ``agent``'s turn lock (a request arriving meanwhile waits for it);
        ``ProjectError`` when a turn of the agent runs or waits already."""
        slot = self.sessions.slot(agent)
        if slot.lock.locked():
            raise ProjectError(
                f"{agent} is working now: /stop {agent} first, or wait for its answer."
            )
        await slot.lock.ticket()
        try:
            yield
        finally:
            slot.lock.release()

    async def _undo(self, row: CardRow, confirmed: bool) -> str:
        asked = await self.ask(row.id)
        if asked.refusal:
            raise ProjectError(asked.refusal)
        if asked.published and not confirmed:
            raise ProjectError(
                f"{asked.branch} is published ({asked.published}): confirm the undo first."
            )
        place = await self.projects.place(row.agent, row.project)
        if self.checks is not None:  # it would go on checking files that go now
            await self.checks.cancel(row.agent, row.project, "its turn was undone")
        left = await uncommitted(place)
        kept = Kept(
            row.id,
            row.agent,
            row.project,
            row.branch,
            row.from_tip,
            row.to_tip,
            left.count,
            "",
            0.0,
        )
        await undoing.keep(place, kept, self._max_mb())
        await undoing.rewind(place, kept)
        before = await self._unpack_start(place, row)
        await self.prune()  # what was kept over 14 days ago goes as this is kept
        logger.info("%s: card %d undone on #%s", row.agent, row.id, row.project)
        what = [f"{row.commits} commit(s)"] if row.commits else []
        what += [f"{left.count} uncommitted change(s)"] if left.count else []
        said = (
            f"↩️ Undone: {row.branch} and {row.agent}'s copy of #{row.project} are back at "
            f"{row.from_tip[:7]}, where card {row.id}'s turn started. Its "
            f"{' and '.join(what) or 'work'} are kept for {KEEP_DAYS} days: /undo lists "
            f"them, /undo {row.id} brings them back."
        )
        said += before
        if asked.published:
            said += (
                f" Its {asked.published} still shows them until the next 🚀 Publish "
                "(which asks before it force-pushes)."
            )
        return said

    async def _unpack_start(self, place: Place, row: CardRow) -> str:
        """The copy's uncommitted work as the turn found it, put back; said in a sentence
        ("" when it had none)."""
        start = self.sessions.cards.start_of(row.id)
        if not start:
            return ""
        try:
            await undoing.unpack(place, start, row.from_tip)
        except ProjectError as e:
            logger.warning("%s: card %d's starting work not put back: %s", row.agent, row.id, e)
            return (
                " The uncommitted work the copy held before that turn could not be put back "
                f"(it is in the kept work: /undo {row.id})."
            )
        return " The uncommitted work the copy held before that turn is back, uncommitted."

    async def kept(self) -> list[Kept]:
        """What undo and Try again kept, every project's, newest first (old ones pruned)."""
        await self.prune()
        found: list[Kept] = []
        for name in self.projects.names():
            try:
                repo, _ = await self.projects.repository(name)
            except ProjectError:
                continue
            found += [k for k in await undoing.kept(repo) if k.project == name]
        return sorted(found, key=lambda k: -k.kept_at)

    async def restore(self, card_id: int, nth: int = 1) -> str:
        """``/undo <n>``: card ``n``'s kept work back (``nth``: which keep of it, ``/undo
        <n>-<nth>``, when a Try again kept more of it); what was done. ``ProjectError``
        with the reason when it will not be."""
        of_card = [k for k in await self.kept() if k.card == card_id]
        found = next((k for k in of_card if k.nth == nth), None)
        if found is None:
            label = str(card_id) if nth == 1 else f"{card_id}-{nth}"
            others = ", ".join(f"/undo {k.label}" for k in of_card)
            raise ProjectError(
                f"Nothing of card {card_id} is kept as {label}"
                + (f": its kept work is {others}." if others else " (/undo lists what is).")
            )
        async with self.idle(found.agent):
            return await self._restore(found)

    async def _restore(self, found: Kept) -> str:
        card_id = found.card
        place = await self.projects.place(found.agent, found.project)
        now = await tip_of(place.repo, found.branch) or await undoing.head_tip(place)
        if now not in (found.from_tip, found.to_tip):
            raise ProjectError(
                f"{found.branch} has moved since card {card_id} was undone (it is at "
                f"{now[:12] or 'nothing'}): not restored, so nothing newer is lost. Its work "
                f"stays kept under {found.ref} in #{found.project}."
            )
        left = await uncommitted(place)
        if (left.count or left.problem) and not await self._as_undone(place, card_id):
            raise ProjectError(
                f"{found.agent}'s copy of #{found.project} holds {left.count} uncommitted "
                "change(s) now: not restored over them (let the agent commit them, or "
                f"/drop {found.agent} #{found.project})."
            )
        await undoing.restore(place, found)
        back = f" and its {found.uncommitted} uncommitted change(s)" if found.uncommitted else ""
        return (
            f"Restored card {card_id}: {found.branch} is at {found.to_tip[:7]} again in "
            f"{found.agent}'s copy of #{found.project}{back}."
        )

    async def _as_undone(self, place: Place, card_id: int) -> bool:
        """Whether the copy's uncommitted work is just what undo put back (the work as card
        ``card_id``'s turn found it, which the kept work holds as that turn left it)."""
        start = self.sessions.cards.start_of(card_id)
        if not start:
            return False
        try:
            now = await undoing.snapshot(place, "Legio: before a restore")
            trees = [await undoing.tree_of(place, c) for c in (now, start)]
        except ProjectError:
            return False
        return trees[0] == trees[1] != ""

    async def models(self, card_id: int) -> tuple[str | None, list[str]]:
        """What 🔀 Try again on card ``card_id`` offers: the model its turn was asked on
        (None: the agent's own), and every model of ``[models]`` (``ProjectError``: no card)."""
        choices = self.sessions.choices
        row = await self._row(card_id)
        asked = await self._asked(row)
        same = await choices.asked(row.agent, asked.seq) if asked is not None else None
        return same, choices.names

    async def again(self, card_id: int, model: str | None = None) -> tuple[str, Request]:
        """🔀 Try again: a new branch from card ``card_id``'s start in its copy (the copy's
        uncommitted work kept as an undo keeps it), and the turn's request to ask again on
        ``model`` (None: the model that turn was asked on); what was done, in a sentence."""
        row = await self._row(card_id)
        asked = await self._asked(row)
        if asked is None or not asked.text.strip():
            raise ProjectError(f"The request of card {row.id}'s turn is not recorded: ask it anew.")
        choices = self.sessions.choices
        if model is not None and choices.refusal(model):
            raise ProjectError(str(choices.refusal(model)))
        model = model or await choices.asked(row.agent, asked.seq)
        async with self.idle(row.agent):
            branch, kept = await self._fork(row)
        said = (
            f"🔀 {row.agent} tries card {row.id}'s request again on {branch}"
            + (f", on {model}" if model else "")
            + f", from {row.from_tip[:7]}; {row.branch} stays as it is"
            + (f" (the copy's {kept} uncommitted change(s) kept: /undo)." if kept else ".")
        )
        request = Request(text=asked.text, lane=row.agent, project=row.project, model=model)
        return said, request

    async def _fork(self, row: CardRow) -> tuple[str, int]:
        """The new branch of a Try again, and how many uncommitted changes were kept."""
        place = await self._place(row)
        left = await uncommitted(place)
        if left.count:
            head = await undoing.head_tip(place)
            kept = Kept(
                row.id,
                row.agent,
                row.project,
                place.branch,
                row.from_tip,
                head,
                left.count,
                "",
                0.0,
            )
            await undoing.keep(place, kept, self._max_mb())
        return await undoing.fork(place, row.from_tip, row.agent), left.count

    async def _asked(self, row: CardRow) -> Nuntius | None:
        """The request card ``row``'s turn answered, as recorded."""
        answer = (
            await nuntius_at(self.sessions.praetorium, row.answer_seq) if row.answer_seq else None
        )
        if answer is None or not answer.reply_to:
            return None
        return await self.sessions.praetorium.get(answer.reply_to)

    async def prune(self) -> int:
        """Remove what was kept longer than ``KEEP_DAYS``, in every project; how many."""
        return await prune_all(self.projects)


async def prune_all(projects: Projects) -> int:
    """What undo kept longer than ``KEEP_DAYS`` removed from every project (at start, and
    before ``/undo`` lists); how many. A project that cannot be read is logged."""
    gone = 0
    for name in projects.names():
        try:
            repo, _ = await projects.repository(name)
            gone += await undoing.prune(repo)
        except ProjectError as e:
            logger.warning("#%s: what undo kept could not be pruned: %s", name, e)
    return gone
