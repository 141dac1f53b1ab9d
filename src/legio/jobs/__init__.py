"""Scheduled jobs: when a job is due (cron, one-shot, the owner's time zone) and the
scheduler that runs each once, across restarts.

Modules:

- ``schedule``: cron expressions (cronsim), one-shot times, the owner's time zone
  (zoneinfo), DST-correct next runs
- ``scheduler``: `Scheduler`
"""
