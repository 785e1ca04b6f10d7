"""Generative checkpoints from before add-ons: the ``trierec: true`` flag, mapped to the TrieRec add-on.

Before add-ons, ``TIGER``/``SIDDecoder`` took ``trierec: bool`` and kept TrieRec's tables at
``backbone.abs_enc.*`` and ``backbone.rel_bias.*``. Now TrieRec is an add-on
(``addons: [{class_path: recframe.models.generative.TrieRec}]``) whose tables live at
``backbone.addons.<i>.abs_enc.*`` / ``backbone.addons.<i>.rel_bias.*``; the weights are the same tensors.

* Loading through the model (``trainer.fit/test(ckpt_path=...)``, ``TIGER.load_from_checkpoint``,
  ``model.load_state_dict``) maps an old checkpoint on the fly.
* Any other reader (e.g. ``Recommender.from_checkpoint``, which builds the model from the stored
  hyperparameters and so sees the unknown ``trierec`` argument) needs the file migrated once::

      python -m recframe.models.generative.legacy OLD.ckpt NEW.ckpt

  (``NEW`` may equal ``OLD``; the write is atomic.)
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, MutableMapping
from typing import Any

#: old state-dict prefixes of TrieRec's tables (inside the backbone)
LEGACY_MODULES = ("abs_enc.", "rel_bias.")
TRIEREC_SPEC = {"class_path": "recframe.models.generative.trierec.TrieRec", "init_args": {}}
MIGRATE_HINT = "python -m recframe.models.generative.legacy OLD.ckpt NEW.ckpt"


def has_legacy_keys(state: Mapping[str, Any], prefix: str = "backbone.") -> bool:
    """Whether a state dict holds TrieRec tables under their pre-add-on names."""
    return any(key.startswith(prefix + m) for key in state for m in LEGACY_MODULES)


def map_legacy_state(state: Mapping[str, Any], addon_index: int, prefix: str = "backbone.") -> dict[str, Any]:
    """A copy of ``state`` with ``<prefix>abs_enc.*``/``rel_bias.*`` renamed to the add-on's keys."""
    out: dict[str, Any] = {}
    for key, value in state.items():
        for module in LEGACY_MODULES:
            if key.startswith(prefix + module):
                key = f"{prefix}addons.{addon_index}.{key[len(prefix):]}"
                break
        out[key] = value
    return out


def is_legacy_checkpoint(checkpoint: Mapping[str, Any]) -> bool:
    """Whether a checkpoint dict was written with the ``trierec`` flag."""
    hparams = checkpoint.get("hyper_parameters") or {}
    return "trierec" in hparams or has_legacy_keys(checkpoint.get("state_dict") or {})


def migrate_checkpoint(checkpoint: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Rewrite an old checkpoint dict in place (and return it): ``trierec: true`` becomes
    ``addons: [TrieRec]``, ``trierec: false`` becomes ``addons: []``, and the state keys move. Idempotent."""
    hparams = checkpoint.get("hyper_parameters")
    trierec = False
    if isinstance(hparams, MutableMapping) and "trierec" in hparams:
        trierec = bool(hparams.pop("trierec"))
        addons = list(hparams.get("addons") or [])
        if trierec and not any(_is_trierec(spec) for spec in addons):
            addons.append(dict(TRIEREC_SPEC))
        hparams["addons"] = addons
    state = checkpoint.get("state_dict")
    if isinstance(state, Mapping) and has_legacy_keys(state):
        specs = (hparams or {}).get("addons") or [TRIEREC_SPEC]
        index = next((i for i, spec in enumerate(specs) if _is_trierec(spec)), 0)
        checkpoint["state_dict"] = map_legacy_state(state, index)
    return checkpoint


def _is_trierec(spec: Any) -> bool:
    """A TrieRec add-on, or its spec."""
    if isinstance(spec, Mapping):
        return str(spec.get("class_path", "")).rsplit(".", 1)[-1] == "TrieRec"
    return type(spec).__name__ == "TrieRec"


def main(argv: list[str] | None = None) -> int:
    """``python -m recframe.models.generative.legacy OLD NEW``: migrate one checkpoint file."""
    from recframe.checkpoint_io import load_checkpoint, save_checkpoint

    parser = argparse.ArgumentParser(description="Migrate a generative checkpoint written with `trierec: "
                                     "true/false` to the add-on format.")
    parser.add_argument("old")
    parser.add_argument("new")
    ns = parser.parse_args(argv)
    checkpoint = load_checkpoint(ns.old)
    if not is_legacy_checkpoint(checkpoint):
        print(f"{ns.old}: already in the add-on format; nothing to do")
        if ns.new != ns.old:
            save_checkpoint(checkpoint, ns.new)
        return 0
    save_checkpoint(migrate_checkpoint(checkpoint), ns.new)
    print(f"{ns.old} -> {ns.new}: addons = {checkpoint['hyper_parameters'].get('addons')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
