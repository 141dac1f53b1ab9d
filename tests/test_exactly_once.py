"""Property: within one SDK session each visible nuntius reaches a centurio exactly once.

Random interleavings of Caesar's messages to one or several centuriones, to ``@all``
and to the Legatus, with daemon restarts and idle reaping in between (sessions resume;
each message's CLIs started ahead while it is stored, as the Legatus does). From what the
fake CLI logged, every nuntius a centurio may see reaches it exactly once — as
history, as the query text, or as its own answer — and no other nuntius ever does.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from legio.store.praetorium import Nuntius
from tests.conftest import CASTRA_TEMPLATE, FakeCli
from tests.fakes.cli_log import FAKE_CLI
from tests.legion import Legion, history_ids

CENTURIONES = ["vorenus", "pullo", "brutus"]
STEP = st.one_of(
    st.tuples(
        st.just("to"), st.lists(st.sampled_from(CENTURIONES), min_size=1, max_size=3, unique=True)
    ),
    st.tuples(st.just("all")),
    st.tuples(st.just("legatus")),
    st.tuples(st.just("restart")),
    st.tuples(st.just("reap")),
)


def make_castra(root: Path) -> Path:
    castra = root / "castra"
    shutil.copytree(CASTRA_TEMPLATE, castra, ignore=shutil.ignore_patterns("praetorium.db*"))
    (castra / "centuriones" / "brutus").mkdir(exist_ok=True)
    (castra / "centuriones" / "brutus" / "prompt.md").write_text("# Brutus\n")
    return castra


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(STEP, min_size=1, max_size=8))
async def test_each_visible_nuntius_reaches_a_centurio_exactly_once(steps: list[tuple]) -> None:  # type: ignore[type-arg]
    root = Path(tempfile.mkdtemp(prefix="legio-once-"))
    fake = FakeCli(FAKE_CLI, root / "log", root / "state")
    saved = {k: os.environ.get(k) for k in ("FAKE_CLAUDE_LOG_DIR", "FAKE_CLAUDE_STATE_DIR")}
    os.environ["FAKE_CLAUDE_LOG_DIR"] = str(fake.log_dir)
    os.environ["FAKE_CLAUDE_STATE_DIR"] = str(fake.state_dir)
    legion = await Legion(make_castra(root), fake).start()
    queries: dict[str, list[Nuntius]] = {name: [] for name in CENTURIONES}
    try:
        for i, step in enumerate(steps):
            text = f"message {i}"
            if step[0] == "restart":
                await legion.restart()
                continue
            if step[0] == "reap":  # every session idle past the timeout: its CLI ended
                timeout, legion.manager.reaper.idle_timeout_s = (
                    legion.manager.reaper.idle_timeout_s,
                    -1,
                )
                await legion.manager.reap_idle()
                legion.manager.reaper.idle_timeout_s = timeout
                continue
            if step[0] == "legatus":
                asked = await legion.post(text, ["legatus"])
                await legion.praetorium.post(
                    "legatus", f"answer {i}", ["caesar"], reply_to=asked.id
                )
                continue
            names = CENTURIONES if step[0] == "all" else list(step[1])
            legion.manager.prewarm(names)  # their CLIs start while the nuntius is stored
            nuntius = await legion.post(text, ["all"] if step[0] == "all" else names)
            replies = await legion.manager.dispatch_many(names, nuntius)
            for name in names:
                queries[name].append(nuntius)
                await legion.praetorium.post(
                    name, replies[name].text, ["caesar"], reply_to=nuntius.id
                )

        for name in CENTURIONES:
            processes = legion.processes(name)
            assert len({p.session_id for p in processes}) <= 1, "one SDK session, resumed"
            prompts = [prompt for p in processes for prompt in p.prompts]
            assert len(prompts) == len(queries[name])
            delivered: list[str] = []
            for prompt, query in zip(prompts, queries[name], strict=True):
                assert prompt.endswith(query.text)
                delivered += [*history_ids(prompt), query.id]
            visible = await legion.praetorium.get_visible_nuntii(name, 100_000)
            own = [n.id for n in visible if n.sender == name]
            last = queries[name][-1].seq if queries[name] else 0
            expected = [n.id for n in visible if n.seq <= last or n.sender == name]
            counts = Counter(delivered + own)
            assert [i for i, c in counts.items() if c > 1] == [], "delivered twice"
            assert sorted(counts) == sorted(expected), "missing or invisible nuntii"
    finally:
        await legion.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(root, ignore_errors=True)
