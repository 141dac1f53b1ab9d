"""The forge: Caesar's remote (GitHub first, behind a seam), reached by Legio alone with
the token only Legio holds. Agents propose; Legio pushes, opens pull requests, follows CI
and reads issues, outside every sandbox.

Modules:

- ``asks``: what 🛠 Fix and 💬 Address ask the agent
- ``base``: the seam (``Forge``) and the values it answers with
- ``checkup``: ``legio check``'s forge lines
- ``ci``: following the pull requests Legio opened: CI, reviews, their end
- ``forgetools``: the agent's read-only forge tools, served in-process
- ``github``: GitHub and GitHub Enterprise over the REST API
- ``prtext``: a pull request's text from the agent made inert and visible
- ``publish``: Publish: previewed, then pushed and the pull request opened or updated
- ``push``: pushing Legio's own branch with the token through a pipe
- ``station``: the forge wired for the engine
- ``transport``: conditional requests, rate limit, retries, the forge's reasons
- ``untrusted``: the forge's words bounded, escaped and marked
- ``merging``: ✅ Merge: a green pull request of Legio's merged after Caesar's tap
"""
