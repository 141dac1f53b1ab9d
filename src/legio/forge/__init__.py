"""The forge: Caesar's remote (GitHub first, behind a seam), reached by Legio alone with
the token only Legio holds. Agents propose; Legio pushes, opens pull requests, follows CI
and reads issues, outside every sandbox.

Modules:

- ``base``: the seam (``Forge``) and the values it answers with
- ``github``: GitHub and GitHub Enterprise over the REST API
- ``transport``: conditional requests, rate limit, retries, the forge's reasons
"""
