"""Agent sessions, one job per module: ``spec`` (what an agent is), ``history`` (the XML it
reads), ``turn`` (one turn's answer and tokens), ``client`` (a live SDK session), ``slot``
(per-agent state and the turn lock), ``compaction`` (summaries), ``context`` (what a query
carries), ``manager`` (the ``SessionManager`` that runs them all)."""
