"""The Telegram front-end (python-telegram-bot): Caesar only, every update stamped in
arrival order, answers rendered for Telegram, never blocked.

Modules:

- ``admission``: who the Telegram bot obeys
- ``asking``: approvals and agents' questions as Telegram buttons, taps (Stop too),
  notices to Caesar
- ``bot``: the python-telegram-bot front-end
- ``conversation``: Telegram's gestures
- ``downloads``: which file a Telegram message carries, an album's messages as one
  request, fetching them (`getFile`) for…
- ``drafts``: streamed answers
- ``hearing``: a voice note in Telegram
- ``lanes``: the topic a request's messages go to
- ``sending``: Telegram sending
- ``status``: Telegram's typing action and the throttled `⏳` status message
- ``stuckview``: a stuck turn said in its agent's lane, with Stop and Keep waiting
"""
