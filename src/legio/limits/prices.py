"""``[models]`` in ``legio.toml``: the model names Caesar may ask for (``@vorenus:opus``,
``/model``), each with its id and price; the defaults; a model's price by name or id
(the budget's "would this turn fit", ``legio.limits.budget``)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

MODEL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")  # a [models] key: @vorenus:<name>


class ModelChoice(BaseModel):
    """One entry of ``[models]``: a short name's model id (what ``--model`` and
    ``set_model`` take; the CLI's aliases ``opus``/``sonnet``/``haiku`` work) and its
    price in US dollars per million tokens (the budget's "would this fit")."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    id: str = Field(min_length=1, max_length=100)
    input_usd: float = Field(ge=0)
    output_usd: float = Field(ge=0)


def default_models() -> dict[str, ModelChoice]:
    """``[models]`` when legio.toml has none: the CLI's aliases at their list prices."""
    return {
        "opus": ModelChoice(id="opus", input_usd=5.0, output_usd=25.0),
        "sonnet": ModelChoice(id="sonnet", input_usd=3.0, output_usd=15.0),
        "haiku": ModelChoice(id="haiku", input_usd=1.0, output_usd=5.0),
    }


def model_price(models: dict[str, ModelChoice], model: str | None) -> ModelChoice | None:
    """The ``[models]`` entry of ``model`` (its name or its id), if there is one."""
    if model is None:
        return None
    if model in models:
        return models[model]
    return next((m for m in models.values() if m.id == model), None)
