"""What every table of ``legio.toml`` shares: no unknown key, values checked on
assignment too."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")  # an environment variable's name


class Strict(BaseModel):
    """A table of ``legio.toml``: an unknown key is an error, not ignored."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
