"""Checks of model settings by constructor argument name, shared by every model.

An argument name means the same thing in every recframe model (``hidden`` is a
width, ``dropout`` a probability, ``lr`` a learning rate), so one table checks
them all: :meth:`recframe.models.base.RecModel.check_settings` applies it to
the arguments a model's constructor takes, before any layer is built, and the
``recframe`` command applies it to the parsed config before any data loads.
A value of ``None`` is not checked (an optional setting left out, or a
setting the command links from the data later, such as ``n_items``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recframe.config_checks import SettingError, check_real, check_whole

#: whole numbers >= 1, with what they mean
WHOLE_POSITIVE: dict[str, str] = {
    "n_items": "the number of items, linked from the data",
    "dim": "the embedding width",
    "hidden": "the model width",
    "inner": "the feed-forward width",
    "max_len": "the longest history the model reads",
    "n_heads": "attention heads",
    "n_kv_heads": "key/value heads",
    "n_negatives": "sampled negatives",
    "n_slots": "memory slots",
    "segment_len": "items per segment",
    "chunk_size": "items scored per chunk",
    "validation_beam": "the beam width of validation decoding",
}
#: whole numbers >= 0
WHOLE_NON_NEGATIVE: dict[str, str] = {
    "n_users": "the number of users, linked from the data",
    "n_layers": "layers; 0 keeps only the embeddings",
}
#: finite numbers > 0
POSITIVE: dict[str, str] = {"lr": "the optimiser's learning rate"}
#: finite numbers >= 0
NON_NEGATIVE: dict[str, str] = {
    "weight_decay": "the optimiser's weight decay",
    "reg_weight": "the weight of the embedding penalty",
}
#: probabilities in [0, 1)
DROPOUTS: dict[str, str] = {
    "dropout": "a dropout probability",
    "attn_dropout": "a dropout probability on attention weights",
    "codebook_dropout": "a dropout probability",
}


def check_model_settings(owner: str, settings: Mapping[str, Any]) -> None:
    """Refuse the first out-of-range setting of ``settings`` (constructor argument -> value).

    Checks each known argument name (tables above), then the attention shape: the width
    (``hidden``, else ``dim``) must split evenly into ``n_heads`` heads, and ``n_kv_heads``
    must divide ``n_heads``.

    Raises:
        SettingError: naming ``owner`` and the argument (as ``model.init_args.KEY``, where a config sets it).
    """
    try:
        _check(owner, settings)
    except SettingError as exc:
        raise exc.in_section("model.init_args.") from None


def _check(owner: str, settings: Mapping[str, Any]) -> None:
    given = {key: value for key, value in settings.items() if value is not None}
    for key, value in given.items():
        if key in WHOLE_POSITIVE:
            check_whole(owner, key, value, 1, WHOLE_POSITIVE[key])
        elif key in WHOLE_NON_NEGATIVE:
            check_whole(owner, key, value, 0, WHOLE_NON_NEGATIVE[key])
        elif key in POSITIVE:
            check_real(owner, key, value, 0.0, low_open=True, meaning=POSITIVE[key])
        elif key in NON_NEGATIVE:
            check_real(owner, key, value, 0.0, meaning=NON_NEGATIVE[key])
        elif key in DROPOUTS:
            check_real(owner, key, value, 0.0, 1.0, high_open=True, meaning=DROPOUTS[key])
    heads = given.get("n_heads")
    width_key = "hidden" if "hidden" in given else "dim"
    width = given.get(width_key)
    if heads is not None and width is not None and width % heads:
        fits = ", ".join(str(h) for h in range(1, min(width, 16) + 1) if width % h == 0)
        raise SettingError(owner, "n_heads", heads,
                           f"must divide {width_key}={width} (each head gets {width_key} / n_heads "
                           f"dimensions); use one of {fits}, or change {width_key}")
    kv_heads = given.get("n_kv_heads")
    if heads is not None and kv_heads is not None and heads % kv_heads:
        raise SettingError(owner, "n_kv_heads", kv_heads,
                           f"must divide n_heads={heads} (each key/value head serves a group of query "
                           "heads); leave it out for ordinary multi-head attention")
