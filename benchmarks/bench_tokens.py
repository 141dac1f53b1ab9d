"""Token economy: the history each agent is sent, against the seed and the lower bound.

A scripted conversation of 300 Caesar nuntii over the Legatus and 4 centuriones, with
@all broadcasts, multi-mentions, 2 daemon restarts, 1 prompt edit and 1 token-ceiling
rebuild, runs through the real Legatus, SessionManager and SDK on the fake CLI. From
what each CLI process received we count the history injected (characters; tokens ≈
chars/4) and compare:

(a) Legio as built;
(b) the seed: the last 50 visible nuntii injected on every centurio dispatch (its
    visibility rule, the message itself included), the Legatus given no history;
(c) the lower bound: per SDK session, each nuntius the agent must learn of (visible,
    before its latest query, not written or sent to it in that session, and within
    the bootstrap window for a session that started fresh) delivered once.

Also: duplicate deliveries within an SDK session, and continuity after each restart
(the share of the nuntii an agent had seen that are still in its context).

Compaction: at message 250 pullo's context passes the ceiling. On its next message it
writes a summary and a new session starts from it. We compare what that new session
starts with against the seed's blunt reset (a new session given the last 50 nuntii)
and Legio's plain rebuild without a summary (the window within the token budget): the
tokens given before the message, and how many of the Caesar nuntii pullo had been
asked before are named in what it is given. The fake model's "summary" names each
earlier turn by its first 80 characters, so that column shows what the mechanism can
carry, not what a real model will choose to keep.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import re
import shutil
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from _report import table, update_section

from legio.app import LegioApp
from legio.config import load_config
from legio.sessions.history import (
    estimate_tokens,
    fit_to_budget,
    format_context_notice,
    format_history_xml,
)
from legio.store.praetorium import Nuntius
from tests.fakes.cli_log import FAKE_CLI, read_cli_logs

CENTURIONES = ["vorenus", "pullo", "brutus", "cato"]
AGENTS = ["legatus", *CENTURIONES]
BLOCK = re.compile(r"<praetorium .*?</praetorium>(\s*<context_notice>.*?</context_notice>)?", re.S)
SUMMARY = re.compile(r"<compaction_summary .*?</compaction_summary>\s*", re.S)
MARKER = re.compile(r"\bm(\d+) ")
IDS = re.compile(r'<nuntius id="([0-9a-f-]+)"')
SEED_WINDOW = 50
MESSAGES = 300
RESTARTS = (100, 200)
PROMPT_EDIT = 150
CEILING = 250


def make_castra(root: Path) -> Path:
    castra = root / "castra"
    (castra / "legatus").mkdir(parents=True)
    shutil.copy(Path(__file__).parents[1] / "castra" / "legatus" / "prompt.md", castra / "legatus")
    for name in CENTURIONES:
        folder = castra / "centuriones" / name
        folder.mkdir(parents=True)
        (folder / "prompt.md").write_text(
            f"---\ndescription: {name} the specialist\n---\n# {name}\n"
        )
    return castra


def script(rng: random.Random) -> list[str]:
    words = [
        "bridge",
        "wall",
        "road",
        "aqueduct",
        "legion",
        "supply",
        "river",
        "camp",
        "tax",
        "grain",
    ]
    lines = []
    for i in range(MESSAGES):
        text = f"m{i} " + " ".join(rng.choices(words, k=rng.randint(5, 40)))
        r = rng.random()
        if i == CEILING:
            lines.append(f"@pullo USAGE 10 200000 0\n{text}")
        elif r < 0.35:
            lines.append(text)
        elif r < 0.70:
            lines.append(f"@{rng.choice(CENTURIONES)} {text}")
        elif r < 0.88:
            names = rng.sample(CENTURIONES, rng.randint(2, 3))
            lines.append(" ".join(f"@{n}" for n in names) + f" {text}")
        else:
            lines.append(f"@all {text}")
    return lines


async def run_conversation(root: Path) -> tuple[Path, list[Nuntius]]:
    castra = make_castra(root)
    config_path = root / "legio.toml"
    config_path.write_text(f'max_input_tokens = 150000\n[claude]\ncli_path = "{FAKE_CLI}"\n')
    config = load_config(config_path)
    legatus = await LegioApp.open(config)
    try:
        for i, text in enumerate(script(random.Random(7))):
            if i in RESTARTS:
                await legatus.close()
                legatus = await LegioApp.open(config)
            if i == PROMPT_EDIT:
                prompt = castra / "centuriones" / "vorenus" / "prompt.md"
                prompt.write_text(prompt.read_text() + "\nBe brief.\n")
            await legatus.handle_message(text)
        nuntii = list(reversed(await legatus.praetorium.get_history(10_000)))
    finally:
        await legatus.close()
    return castra, nuntii


def visible(nuntius: Nuntius, agent: str) -> bool:
    if agent == "legatus":
        return True
    return agent in nuntius.audience or nuntius.audience == ("all",) or nuntius.sender == agent


def seed_visible(nuntius: Nuntius, agent: str) -> bool:
    return agent in nuntius.audience or nuntius.audience == ("all",)


def measure(log_dir: Path, nuntii: list[Nuntius]) -> dict[str, object]:
    by_id = {n.id: n for n in nuntii}
    by_text = {n.text: n for n in nuntii if n.sender == "caesar"}
    processes = read_cli_logs(log_dir)
    agent_of = {}
    for p in processes:
        key = p.mcp_servers[0]
        agent_of[p.pid] = "legatus" if key == "legatus_tools" else key.removeprefix("memoria_")

    injected_chars: Counter[str] = Counter()
    lower_chars: Counter[str] = Counter()
    duplicates = 0
    sessions: dict[tuple[str, str], dict[str, object]] = defaultdict(
        lambda: {"delivered": [], "queries": [], "fresh": None, "window_start": None}
    )
    order: list[tuple[str, str]] = []
    for p in processes:
        agent = agent_of[p.pid]
        key = (agent, p.session_id)
        if key not in sessions:
            order.append(key)
        state = sessions[key]
        for prompt in p.prompts:
            block = BLOCK.search(prompt)
            ids = IDS.findall(block.group(0)) if block else []
            injected_chars[agent] += len(block.group(0)) if block else 0
            if state["fresh"] is None:
                state["fresh"] = "<context_notice>" in prompt or not p.resumed
                state["window_start"] = by_id[ids[0]].seq if ids else None
            state["delivered"].extend(ids)  # type: ignore[union-attr]
            query_text = BLOCK.sub("", SUMMARY.sub("", prompt))
            query_text = re.sub(
                r"<centurio_status>.*?</centurio_status>\s*", "", query_text, flags=re.S
            ).strip()
            query = by_text.get(query_text)
            if query is not None:
                state["queries"].append(query)  # type: ignore[union-attr]

    for (agent, _), state in sessions.items():
        delivered: list[str] = state["delivered"]  # type: ignore[assignment]
        duplicates += sum(c - 1 for c in Counter(delivered).values() if c > 1)
        queries: list[Nuntius] = state["queries"]  # type: ignore[assignment]
        if not queries:
            continue
        last = max(q.seq for q in queries)
        first = min(q.seq for q in queries)
        query_ids = {q.id for q in queries}
        start = state["window_start"] if state["fresh"] else 0
        own_from = first if state["fresh"] else 0
        needed = [
            n
            for n in nuntii
            if visible(n, agent)
            and n.seq < last
            and n.id not in query_ids
            and not (n.sender == agent and n.seq > own_from)
            and not (n.reply_to in {q.id for q in queries} and n.audience == (agent,))
            and (start is None or n.seq >= start or n.id in delivered)
            and (state["fresh"] or n.seq > first or n.id in delivered)
        ]
        needed = [n for n in needed if n.id in delivered or n.seq > (start or 0)]
        lower_chars[agent] += len(format_history_xml(needed, agent)) if needed else 0

    seed_chars: Counter[str] = Counter()
    for n in nuntii:
        if n.sender != "caesar":
            continue
        for agent in CENTURIONES:
            if seed_visible(n, agent) and n.audience != ("legatus",):
                window = [m for m in nuntii if m.seq <= n.seq and seed_visible(m, agent)][
                    -SEED_WINDOW:
                ]
                seed_chars[agent] += len(format_history_xml(window, agent))

    return {
        "a": injected_chars,
        "b": seed_chars,
        "c": lower_chars,
        "duplicates": duplicates,
        "sessions": order,
        "processes": processes,
        "agent_of": agent_of,
    }


def continuity(processes: list, agent_of: dict[int, str]) -> list[tuple[str, str, float]]:  # type: ignore[type-arg]
    """After each restart: did each agent's next CLI resume its session (thread kept)?"""
    rows = []
    by_agent: dict[str, list] = defaultdict(list)  # type: ignore[type-arg]
    for p in processes:
        by_agent[agent_of[p.pid]].append(p)
    for agent, procs in by_agent.items():
        for before, after in itertools.pairwise(procs):
            if after.resumed:
                rows.append((agent, "resumed", 1.0))
            else:
                seen = set()
                for prompt in before.prompts:
                    seen.update(IDS.findall(prompt))
                window = set(IDS.findall(after.prompts[0])) if after.prompts else set()
                share = len(seen & window) / len(seen) if seen else 1.0
                rows.append((agent, "new session (prompt edit, ceiling)", share))
    return rows


def compaction(processes: list, agent_of: dict[int, str], nuntii: list[Nuntius]) -> str:  # type: ignore[type-arg]
    """The new session after pullo's ceiling: Legio's compaction, its plain rebuild, the seed."""
    agent = "pullo"
    after = next(
        p
        for p in processes
        if agent_of[p.pid] == agent and p.prompts and p.prompts[0].startswith("<compaction_summary")
    )
    first = after.prompts[0]
    by_text = {n.text: n for n in nuntii if n.sender == "caesar"}
    given = first[: first.rindex("</context_notice>") + len("</context_notice>")]
    query = by_text[first[len(given) :].strip()]
    asked = {
        int(m)
        for n in nuntii
        if n.sender == "caesar" and n.seq < query.seq and seed_visible(n, agent)
        for m in MARKER.findall(n.text)[:1]
    }

    def named(text: str) -> int:
        return len({int(m) for m in MARKER.findall(text)} & asked)

    before = [n for n in nuntii if n.seq < query.seq]
    seed = format_history_xml([n for n in before if seed_visible(n, agent)][-SEED_WINDOW:], agent)
    plain_nuntii, _ = fit_to_budget([n for n in before if visible(n, agent)][-SEED_WINDOW:], 40_000)
    plain = format_history_xml(plain_nuntii, agent) + "\n\n" + format_context_notice()
    summary = SUMMARY.search(first)
    summary_tokens = estimate_tokens(summary.group(0)) if summary else 0
    rows = [
        [
            "seed: blunt reset (last 50 nuntii)",
            f"{estimate_tokens(seed):,}",
            "0",
            f"{named(seed)} of {len(asked)}",
        ],
        [
            "Legio without a summary (plain rebuild)",
            f"{estimate_tokens(plain):,}",
            "0",
            f"{named(plain)} of {len(asked)}",
        ],
        [
            "Legio after compaction",
            f"{estimate_tokens(given):,}",
            f"{summary_tokens:,}",
            f"{named(given)} of {len(asked)}",
        ],
    ]
    return table(
        [
            f"{agent}'s new session after the ceiling",
            "tokens given",
            "of which summary",
            "earlier requests named",
        ],
        rows,
    )


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="legio-bench-tokens-"))
    os.environ["FAKE_CLAUDE_LOG_DIR"] = str(root / "log")
    os.environ["FAKE_CLAUDE_STATE_DIR"] = str(root / "state")
    try:
        _, nuntii = asyncio.run(run_conversation(root))
        result = measure(root / "log", nuntii)
        a, b, c = result["a"], result["b"], result["c"]  # type: ignore[assignment]
        rows = []
        for agent in AGENTS:
            ratio = a[agent] / c[agent] if c[agent] else 1.0  # type: ignore[index]
            rows.append(
                [
                    agent,
                    f"{a[agent] // 4:,}",  # type: ignore[index]
                    f"{b[agent] // 4:,}",  # type: ignore[index]
                    f"{c[agent] // 4:,}",  # type: ignore[index]
                    f"{ratio:.2f}",
                ]
            )
        total_a, total_b, total_c = sum(a.values()), sum(b.values()), sum(c.values())  # type: ignore[attr-defined]
        rows.append(
            [
                "all",
                f"{total_a // 4:,}",
                f"{total_b // 4:,}",
                f"{total_c // 4:,}",
                f"{total_a / total_c:.2f}",
            ]
        )
        tokens = table(["agent", "(a) Legio", "(b) seed", "(c) lower bound", "(a)/(c)"], rows)
        cont = continuity(result["processes"], result["agent_of"])  # type: ignore[arg-type]
        compacted = compaction(result["processes"], result["agent_of"], nuntii)  # type: ignore[arg-type]
        resumed = [r for r in cont if r[1] == "resumed"]
        fresh = [r for r in cont if r[1] != "resumed"]
        saving = 1 - total_a / total_b if total_b else 0.0
        body = (
            f"{MESSAGES} Caesar nuntii, {len(nuntii)} nuntii in all; history tokens ≈ chars/4.\n\n"
            f"{tokens}\n\n"
            "- Duplicate deliveries within an SDK session: "
            f"**{result['duplicates']}** (target 0).\n"
            f"- (a)/(c) overall: **{total_a / total_c:.2f}** (target 1.00).\n"
            f"- Saving against the seed: **{saving:.0%}** of the history tokens "
            "(and the seed gives the Legatus no history at all).\n"
            f"- Continuity: {len(resumed)} agent restarts resumed their session with the whole "
            f"thread (1.00 each); {len(fresh)} new sessions (prompt edit, token ceiling) started "
            "from the bootstrap window: "
            + ", ".join(f"{agent} {share:.2f}" for agent, _, share in fresh)
            + ".\n\n"
            "Compaction (pullo passes the ceiling at message 250; its next message starts a "
            "new session):\n\n"
            f"{compacted}\n"
        )
        print(body)
        update_section("bench_tokens", "## Token economy (`bench_tokens.py`)\n\n" + body)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
