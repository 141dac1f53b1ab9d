"""The terminal front-end: the same door and admin commands as Telegram, on a prompt that
always answers or on piped input.

Modules:

- ``asker``: approvals and questions asked at the prompt (`PromptAsker`) or on piped
  input (`ConsoleAsker`)
- ``prompt``: the console on a terminal (prompt_toolkit)
- ``stream``: the console's streamed text
- ``terminal``: the terminal front-end over the same `LegioApp` and `Admin`
"""
