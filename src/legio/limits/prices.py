"""A model's price: the ``[models]`` entry (``legio.config.ModelChoice``: the names Caesar
may ask for, ``@vorenus:opus``, ``/model``) of a model named by its name or its id, for
the budget's "would this turn fit" (``legio.limits.budget``)."""

from __future__ import annotations

from legio.config import ModelChoice


def model_price(models: dict[str, ModelChoice], model: str | None) -> ModelChoice | None:
    """The ``[models]`` entry of ``model`` (its name or its id), if there is one."""
    if model is None:
        return None
    if model in models:
        return models[model]
    return next((m for m in models.values() if m.id == model), None)
