"""A training recipe (params.yaml ``recipes.<name>``, a suite file's ``recipes``): the settings of a fine-tune, typed.

Its own module: what parses a params file or a suite file (every stage's entry, the data stage's included) depends on
the recipe's type, not on the training loop that runs it (:func:`benchmark.models.train.fine_tune`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from benchmark.config.typed import check, parse_config


@dataclass(frozen=True)
class Recipe:
    """A training recipe (params.yaml ``recipes.<name>``, a suite file's ``recipes``), parsed field by field by
    :func:`benchmark.config.typed.parse_config` (:meth:`from_params`); :meth:`validate` holds the checks across fields.

    ``epochs: 0`` means no training: the initial (e.g. pretrained) weights are
    the checkpoint; such a recipe takes no other hyper-parameters.
    """

    epochs: int = field(metadata=check(minimum=0))
    batch_size: int | None = None  # >= 1 when training (validate)
    lr: float | None = None  # > 0 when training (validate)
    weight_decay: float = field(default=0.0, metadata=check(minimum=0))
    warmup_epochs: float = field(default=0.0, metadata=check(minimum=0))
    warmup_start_factor: float = field(default=0.1, metadata=check(above=0, maximum=1))
    label_smoothing: float = field(default=0.0, metadata=check(minimum=0, maximum=1))
    shift_pixels: int = field(default=0, metadata=check(minimum=0))  # random translation augmentation, in input pixels
    select_by: str = field(
        default="accuracy", metadata=check(choices=("accuracy", "macro_f1"))
    )  # validation score for model selection
    drop_rate: float = field(
        default=0.0, metadata=check(minimum=0)
    )  # dropout the model is built and fine-tuned with (timm drop_rate); MC dropout samples it

    def validate(self) -> None:
        """Checks across fields (the field types and bounds are checked by ``parse_config``)."""
        if self.drop_rate >= 1:
            raise ValueError(f"drop_rate must be a number in [0, 1), got {self.drop_rate!r}")
        if self.epochs == 0:
            given = [
                f.name
                for f in fields(self)
                if f.name not in ("epochs", "select_by") and getattr(self, f.name) != f.default
            ]
            if given:
                raise ValueError(f"epochs 0 means no training; it takes no other keys than select_by, got {given}")
            return
        if self.batch_size is None or self.batch_size < 1 or self.lr is None or self.lr <= 0:
            raise ValueError(
                f"training (epochs {self.epochs}) needs batch_size >= 1, lr > 0; "
                f"got batch_size {self.batch_size!r}, lr {self.lr!r}"
            )

    @classmethod
    def from_params(cls, name: str, raw, where: str = "") -> Recipe:
        """``raw`` (one ``recipes`` entry) as a Recipe; errors name ``where`` (the file) and ``recipe <name>``."""
        return parse_config(cls, raw, f"{where + ': ' if where else ''}recipe {name!r}")


def recipe_of(recipes: Mapping[str, Recipe], name: str, user: str = "") -> Recipe:
    """Recipe ``name`` of ``recipes`` (params.yaml ``recipes``, typed): the one way a stage, a method or a check reads
    the recipe of a zoo entry (``entry.recipe``) or of a method's config. ``ValueError`` naming ``user`` (who asks for
    it, e.g. ``baselines.shallow.a: shallow ensemble of model 'm'``) and the known recipes."""
    if name not in recipes:
        raise ValueError(
            f"{user + ': ' if user else ''}unknown recipe {name!r}; define it in params.yaml 'recipes' "
            f"(known: {sorted(recipes)})"
        )
    return recipes[name]
