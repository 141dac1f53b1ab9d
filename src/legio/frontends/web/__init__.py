"""The cockpit: one web page (a Telegram Mini App, or a browser with ``legio cockpit``'s
one-time link) showing the agents' live work, approvals, work cards, history, memoria,
jobs, spend and health.

``server`` (aiohttp in Legio's loop: door checks, sign-in, live feed), ``auth`` (Telegram's
launch data, sessions, CSRF, one-time links), ``pages`` (the pages and actions, Jinja2
templates), ``charts`` (inline SVG bars), ``live`` (the ``Events`` object and its ring),
``sharing`` (approvals shared with the chat), ``source`` (every door call, in one place).
"""
