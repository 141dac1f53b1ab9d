"""Spending and plan limits: the daily and per-turn budget from the turn records, and the
plan's limits and logins read from the CLI's messages.

Modules:

- ``budget``: the spend budget from the turn records (daily, per agent, per turn), held
  turns, 80 % warning, `/usage`…
- ``plan``: plan limits and logins from the CLI's messages
- ``prices``: a model's ``[models]`` entry (id, price) by its name or id
"""
