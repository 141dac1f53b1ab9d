"""The Telegram front-end (python-telegram-bot): Caesar only, every update stamped in
arrival order, answers rendered for Telegram, never blocked.

Modules:

- ``admission``: who the Telegram bot obeys
- ``asking``: approvals and agents' questions as Telegram buttons, taps (Stop too),
  notices to Caesar
- ``bot``: the python-telegram-bot front-end
- ``serving``: the Application built with every handler, polling, the shutdown in order
- ``cardview``: work cards after turns on projects, silent, with their buttons
- ``diffs``: diffs a phone can read (a card's Diff, ``/diff``): pictures, ``.diff``, ``.html``
- ``conversation``: Telegram's gestures
- ``downloads``: which file a Telegram message carries, an album's messages as one
  request, fetching them (`getFile`) for…
- ``drafts``: streamed answers
- ``forgeview``: forge events in the agent's lane, 🛠 Fix and 💬 Address
- ``cockpitview``: the cockpit's menu button and ``/cockpit``
- ``hearing``: a voice note in Telegram
- ``events``: the bot's ``Events`` (what belongs to no request), attached once
- ``lanes``: the topic a request's messages go to
- ``reactions``: 👀 and 👌 on Caesar's requests, his reactions heard (a note, 👎 → Undo)
- ``publishview``: 🚀 Publish's preview, exactly what is posted, with Post and Cancel
- ``opsview``: the operations' events: a failed backup said, the digest sent silently
- ``sending``: Telegram sending
- ``status``: Telegram's typing action and the throttled `⏳` status message
- ``steermarks``: the ➕ mark of a message that joined a running turn, and its ⏭ button
- ``stuckview``: a stuck turn said in its agent's lane, with Stop and Keep waiting
- ``mergeview``: ✅ Merge on a ✅ CI line, after one confirmation
- ``planview``: an agent's plan as its own message, with ✅ Go, ✏️ Change, ✖ Drop
- ``undoview``: a card's ↩️ Undo and 🔀 Try again
"""
