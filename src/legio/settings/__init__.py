"""The tables of ``legio.toml`` that stand apart from ``legio.config`` (which holds the
whole model, its loading and writing).

Modules:

- ``strict``: what every table shares (no unknown key)
- ``projects``: ``[forge]``, ``[projects]`` and each ``[projects.<name>]``
"""
