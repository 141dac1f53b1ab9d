"""Fences: what an agent may touch, built so a tricked agent cannot reach past them — its
environment, tools and folders, the CLI's OS sandbox and deny rules, the path guard, the
credential stores kept out of reach. Nothing here asks Caesar: a fence refuses.

Modules:

- ``cliconfig``: each agent's own Claude CLI config dir (`castra/state/claude/<agent>/`)
- ``folders``: an agent's workspace and granted folders (`add_dirs`), checked for every
  message (the verdict is…
- ``handoff``: the tokens a restart hands over, read first thing by the new image
- ``jail``: a command Legio runs in an agent's copy (a check) under bubblewrap, in a
  jail built by allow-list, with no capability and no network
- ``checklimits``: a check's processes, memory and ``/tmp`` limited (a systemd scope, a
  cgroup of Legio's own, or rlimits), and ``legio check``'s words on how
- ``guard``: the `PreToolUse` path guard built from the same protected set
- ``keys``: the credential stores of the user running Legio (`~/.ssh/`, `~/.git-
  credentials`, `~/.config/gh/`,…
- ``keyscan``: `legio check`'s walk of `$HOME` for readable key-like files
- ``launch``: `legio run`'s start
- ``policy``: what each agent may touch
- ``safefs``: reading and writing in folders an agent can change without following its
  links
- ``sandbox``: Bash inside the CLI's OS sandbox or not at all
- ``tokenfiles``: files holding Legio's own tokens, found at start and hidden from agents
  and checks
- ``vault``: the forge token, held in Legio's memory alone
"""
