"""Agent sessions: one long-lived Claude CLI per agent, each request given once, each
agent's turns in order and different agents in parallel.

Modules:

- ``client``: `AgentSession`
- ``asides``: `Asides`: notes an agent reads with its next request (Caesar's reactions)
- ``cards``: `WorkCards`: a card after each turn that changed a project, kept for its buttons
- ``choices``: `Choices`: each agent's model and effort (`/model`, `/effort`, `@name:model`)
- ``compaction``: the texts and steps of compaction (summaries before a rebuild,
  `/compact`, after an overflow)
- ``context``: what a query carries (`plan_context`
- ``delivery``: what an agent gets of a message's files
- ``desk``: `ProjectDesk`
- ``errands``: each agent's requests from arrival to outcome and the stops that end them
- ``gatekeeper``: the approval gate
- ``history``: the XML agents read (`<praetorium>`, `<context_notice>`,
  `<centurio_status>`, `<centuriones>`), the…
- ``manager``: `SessionManager`: every agent's CLI, its queue (``reserve``, ``turn_of``), the
  turn handed to ``pipeline``, stops, resets, compaction, idle reaping, status
- ``opening``: starting one agent's CLI: its own config dir, its options (sandbox,
  guard, approval hook, budget…
- ``outbox``: `send_file` (workspace and granted folders, the path guard's checks, 50
  MB; opened once by a link-free…
- ``pipeline``: `TurnPipeline`: what happens inside one agent's turn, step by step
- ``planfence``: plan mode as a fence: what a plan turn may do before Go, its plan file read
  by Legio itself, never through a link
- ``planning``: `Planning`: who plans every request first (``/plan <agent> on``), plans stored
- ``pointers``: what the current message points at, for the agent answering it
- ``query``: one query's message
- ``reaper``: the idle reaper
- ``slot``: `AgentSlot`
- ``steering``: a message added to a running turn (a steer), answered with it, once
- ``spec``: `AgentSpec` from a prompt file (frontmatter, else `legio.toml`)
- ``turn``: one turn
- ``turnback``: ↩️ Undo, ``/undo`` and 🔀 Try again of a work card's turn
"""
