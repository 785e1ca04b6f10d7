"""Collaborative item embeddings (a trained recommender's item table) and text + CF hybrids.

Semantic IDs built from item text alone group items by what their titles and genres say; what a
user's sequence reflects is better captured by a collaborative model's item table. This module
produces that table from any recframe config whose model exposes ``item_embeddings()`` (SASRec,
LightGCN, BPR-MF) and mixes it with text embeddings.

:func:`collaborative_item_embeddings` runs the config in-process, as ``recframe fit --config CONFIG
--seed_everything SEED`` would, but with no logger and its checkpoints beside the cache, in
``<cache_dir>/<key>.run/`` (nothing is written under the user's ``runs/``). A run killed part-way resumes
from that folder's ``last.ckpt`` when the same table is asked for again, with the same result as an
uninterrupted run (the checkpoint holds the random state); the folder is removed once the table is cached.
Early stopping and ``max_epochs`` exactly as the
config says but **no wall-clock cap** (``trainer.max_time`` is set to null: a cached artifact must not
depend on how busy the machine was; ``benchmarks/ml100k_generative.py`` runs SASRec the same way), and
returns the item table of the **best-validation** checkpoint (the test split is
never evaluated). Row 0 (padding) is set to zeros.

Cache: ``<cache_dir>/<key>.npy`` plus ``<key>.json`` (the run: best epoch, its validation NDCG,
epochs, seconds), default ``cache_dir`` ``<dataset root>/.cache/item_collab``, next to the text
cache (:mod:`recframe.features.text_encoder`), written atomically. ``key`` is the sha256 of the
config file's text, the seed, the training split's fingerprint, the recframe version and the model
class path, so the same config text given by any path, on the same training data, hits the same
file; a changed config, seed, data or library version trains anew. The fingerprint of the config's
own training split is checked against ``train`` before training (one ``ValueError`` naming both).

The nested run saves and restores the global random state (torch, CUDA, numpy, Python) and torch's
determinism flags, so calling this from another model's ``bind_data`` leaves that run's randomness
as it would be on a cache hit. Run it on one process (not inside a DDP job: every rank would train).

:func:`hybrid_item_features` is the simple text + collaborative baseline: per-block L2
normalisation and a weighted concatenation. The learned alternative, LETTER's collaborative
regulariser inside the RQ-VAE, is :class:`recframe.tokenizers.RQVAETokenizer`'s ``collaborative``
argument.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from recframe.data.catalog import default_root
from recframe.features.matrix import as_feature_matrix

logger = logging.getLogger("recframe.features")


def default_collab_cache_dir() -> Path:
    """``<dataset root>/.cache/item_collab`` (beside the text cache ``.cache/item_text``)."""
    return default_root() / ".cache" / "item_collab"


def collab_cache_key(config_text: str, seed: int, train_fingerprint: str, model_class: str) -> str:
    """sha256 hex of (config text, seed, training-split fingerprint, recframe version, model class path)."""
    from recframe import __version__

    payload = json.dumps({"config": config_text, "seed": int(seed), "train": train_fingerprint,
                          "recframe": __version__, "model": model_class}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def collaborative_cache_path(train: Any, config: str | Path, seed: int = 0,
                             cache_dir: str | Path | None = None) -> Path:
    """Where :func:`collaborative_item_embeddings` caches the table (``.npy``; the run info is ``.json``)."""
    text, model_class = _read_config(config)
    folder = Path(cache_dir) if cache_dir is not None else default_collab_cache_dir()
    return folder / f"{collab_cache_key(text, seed, train.fingerprint, model_class)}.npy"


def collaborative_item_embeddings(train: Any, config: str | Path, seed: int = 0,
                                  cache_dir: str | Path | None = None, cache: bool = True) -> np.ndarray:
    """Item table ``[n_items + 1, d]`` float32 (row 0 zeros) of the model trained by ``config``.

    Args:
        train: the training :class:`~recframe.data.interactions.Interactions` the table is for (what
            ``bind_data(train)`` receives); its ``fingerprint`` must equal that of the training split
            the config's datamodule builds.
        config: a recframe YAML config (``configs/sasrec_ml100k.yaml``) whose model has
            ``item_embeddings()``.
        seed: ``seed_everything`` of the run (overrides the config's).
        cache_dir: cache folder (default ``<dataset root>/.cache/item_collab``).
        cache: read and write the cache.

    Raises:
        FileNotFoundError: ``config`` does not exist.
        ValueError: the config has no ``model.class_path``, its model has no ``item_embeddings()``,
            its datamodule trains on other data than ``train``, or the run never validated (so there is
            no best-validation checkpoint).
    """
    text, model_class = _read_config(config)
    folder = Path(cache_dir) if cache_dir is not None else default_collab_cache_dir()
    key = collab_cache_key(text, seed, train.fingerprint, model_class)
    path = folder / f"{key}.npy"
    if cache and path.is_file():
        try:
            arr = np.load(path, allow_pickle=False)
            if arr.ndim == 2 and arr.shape[0] == train.n_items + 1:
                logger.info("collaborative item table (%s, seed %d) read from cache %s", model_class, seed,
                            path)
                return arr.astype(np.float32, copy=False)
            logger.warning("collaborative cache %s has shape %s, not [%d, d]; retraining", path, arr.shape,
                           train.n_items + 1)
        except (OSError, ValueError) as exc:
            logger.warning("collaborative cache %s is unreadable (%s); retraining", path, exc)
    if not cache:
        return train_item_table(config, seed=seed, expected_train=train.fingerprint)[0]
    work_dir = path.with_suffix(".run")
    table, info = train_item_table(config, seed=seed, expected_train=train.fingerprint, work_dir=work_dir)
    _write_table(folder, text, seed, train.fingerprint, model_class, table, info)
    shutil.rmtree(work_dir, ignore_errors=True)
    logger.info("collaborative item table cached at %s", path)
    return table


def _write_table(folder: Path, config_text: str, seed: int, train_fingerprint: str, model_class: str,
                 table: np.ndarray, info: dict[str, Any]) -> Path:
    """Write ``table`` and its record (``info`` plus the key's parts) atomically under its cache key."""
    from recframe.checkpoint_io import atomic_write  # lazy: it imports Lightning

    path = folder / f"{collab_cache_key(config_text, seed, train_fingerprint, model_class)}.npy"
    info = {**info, "seed": int(seed), "config_sha256": hashlib.sha256(config_text.encode()).hexdigest(),
            "model": model_class, "train_fingerprint": train_fingerprint, "shape": list(table.shape)}
    atomic_write(path.with_suffix(".json"), lambda fh: fh.write(json.dumps(info, indent=1).encode()))
    buf = io.BytesIO()
    np.save(buf, table, allow_pickle=False)
    atomic_write(path, lambda fh: fh.write(buf.getvalue()))
    return path


def read_run_info(train: Any, config: str | Path, seed: int = 0,
                  cache_dir: str | Path | None = None) -> dict[str, Any] | None:
    """The cached run's record (best epoch, validation NDCG, epochs, seconds), or None if not cached."""
    path = collaborative_cache_path(train, config, seed, cache_dir).with_suffix(".json")
    return json.loads(path.read_text()) if path.is_file() else None


def train_item_table(config: str | Path, seed: int = 0, expected_train: str | None = None,
                     work_dir: str | Path | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """Fit ``config`` without its ``max_time``; return the best-validation item table and the run record.

    The run's checkpoints go to ``work_dir`` (a temporary directory when None). If ``work_dir`` already
    holds ``checkpoints/last.ckpt`` from a killed run of the same table, the fit resumes from it; the caller
    removes ``work_dir`` once it has what it needs.

    The record holds ``best_epoch``, ``best_val_ndcg`` (the monitored ``val_ndcg``: NDCG at the data's
    first cut-off), ``epochs`` (epochs run), ``train_seconds`` (this call's fit; a resumed run counts only
    the part after the resume) and ``resumed_from_epoch`` (None unless it resumed). No caching (see
    :func:`collaborative_item_embeddings`).
    """

    from recframe.checkpoint_io import load_checkpoint
    from recframe.cli import run_cli

    text, model_class = _read_config(config)
    with _restored_global_state(), _run_folder(work_dir) as tmp:
        cli = run_cli(["--config", str(config), "--seed_everything", str(int(seed)),
                       "--trainer.logger", "false", "--trainer.default_root_dir", str(tmp),
                       "--trainer.max_time", "null", "--trainer.enable_model_summary", "false"], run=False)
        trainer, model, dm = cli.trainer, cli.model, cli.datamodule
        if not callable(getattr(model, "item_embeddings", None)):
            raise ValueError(f"config {config}: model {model_class} has no item_embeddings(); use a model "
                             "with an item table (recframe.models.SASRec, LightGCN, BPRMF).")
        fp = dm.split.train.fingerprint
        if expected_train is not None and fp != expected_train:
            raise ValueError(
                f"config {config} trains on data whose training split has fingerprint {fp}, but the "
                f"training data given has fingerprint {expected_train}; use a config whose data: section "
                "builds the same training split (dataset, split, filters, label thresholds).")
        last = tmp / "checkpoints" / "last.ckpt"
        resume = str(last) if last.is_file() else None
        resumed_epoch = int(load_checkpoint(last).get("epoch", -1)) if resume else None
        if resume:
            logger.info("resuming %s from %s (seed %d) for its item table from %s", model_class, config,
                        seed, resume)
        else:
            logger.info("training %s from %s (seed %d) for its item table", model_class, config, seed)
        start = time.perf_counter()
        trainer.fit(model, dm, ckpt_path=resume)
        seconds = time.perf_counter() - start
        ckpt_cb = trainer.checkpoint_callback
        best = getattr(ckpt_cb, "best_model_path", "") or ""
        if not best:
            raise ValueError(f"config {config}: the run never validated, so there is no best-validation "
                             "checkpoint; lower trainer.check_val_every_n_epoch or raise trainer.max_epochs.")
        ckpt = load_checkpoint(best)
        table = _checkpoint_table(model, ckpt, dm.n_items, model_class)
        score = getattr(ckpt_cb, "best_model_score", None)
        info = {"best_epoch": int(ckpt.get("epoch", -1)),
                "best_val_ndcg": None if score is None else float(score),
                "epochs": int(trainer.current_epoch), "train_seconds": round(seconds, 1), "seed": int(seed),
                "resumed_from_epoch": resumed_epoch}
    logger.info("item table %s: best epoch %d, val_ndcg %s, %d epochs, %.1f s", table.shape,
                info["best_epoch"], info["best_val_ndcg"], info["epochs"], seconds)
    return table, info


def adopt_item_table(config: str | Path, checkpoint: str | Path, seed: int = 0,
                     run_info: dict[str, Any] | None = None, cache_dir: str | Path | None = None) -> Path:
    """Cache the item table of a finished run instead of training it again.

    :func:`collaborative_item_embeddings` trains ``config`` at ``seed`` (no wall-clock cap) and keeps the
    best-validation checkpoint's item table. When that very run already exists, e.g. a benchmark's
    ``recframe fit --config CONFIG --seed_everything SEED --trainer.max_time null`` (the Amazon tables
    train SASRec so, for hours per seed), this writes its table under the same cache key, so the next
    collaborative row reads it instead of repeating the run. The caller vouches that ``checkpoint`` is the
    best-validation checkpoint of ``config`` at ``seed``; this checks what it can: the config's training
    split (its fingerprint is part of the key), the checkpoint's model class and its item count.

    Args:
        config: the collaborative config (the path a generative config names in ``collaborative:``).
        checkpoint: the run's best-validation checkpoint (loaded with ``weights_only=True``).
        seed: the run's ``seed_everything``.
        run_info: the run's record (best epoch, validation NDCG, epochs, seconds) for the cache's ``.json``.
        cache_dir: cache folder (default ``<dataset root>/.cache/item_collab``).

    Returns:
        The cache file written (``.npy``; its record is the ``.json`` beside it).

    Raises:
        FileNotFoundError: ``config`` or ``checkpoint`` does not exist.
        ValueError: the checkpoint holds another model class or another item count.
    """
    from recframe.checkpoint_io import load_checkpoint
    from recframe.cli import run_cli

    text, model_class = _read_config(config)
    if not Path(checkpoint).is_file():
        raise FileNotFoundError(f"checkpoint {checkpoint} not found; pass the run's best-validation "
                                "checkpoint (runs/NAME/version_N/checkpoints/best-*.ckpt).")
    with _restored_global_state():
        cli = run_cli(["--config", str(config), "--seed_everything", str(int(seed)),
                       "--trainer.logger", "false"], run=False)
        model, dm = cli.model, cli.datamodule
        ckpt = load_checkpoint(checkpoint)
        stored = (ckpt.get("recframe") or {}).get("model_class")
        built = f"{type(model).__module__}.{type(model).__qualname__}"
        if stored is not None and stored != built:
            raise ValueError(f"checkpoint {checkpoint} holds a {stored}, but config {config} trains a "
                             f"{model_class}; pass a checkpoint of that config's run.")
        train = dm.split.train
        model.bind_data(train)
        table = _checkpoint_table(model, ckpt, dm.n_items, model_class)
    folder = Path(cache_dir) if cache_dir is not None else default_collab_cache_dir()
    info = {**(run_info or {}), "best_epoch": int(ckpt.get("epoch", -1)),
            "adopted_from": Path(checkpoint).name}
    path = _write_table(folder, text, seed, train.fingerprint, model_class, table, info)
    logger.info("item table of %s adopted into the collaborative cache at %s", checkpoint, path)
    return path


def stored_tables(config: str | Path, cache_dir: str | Path | None = None) -> dict[int, Path]:
    """The cached tables of ``config`` as it reads now (same text and model class), by seed: the ``.npy``
    of every cache record whose ``config_sha256`` and ``model`` match. Raises ``ValueError`` when one seed
    has tables for two training splits (say, which one to export by its path instead)."""
    folder = Path(cache_dir) if cache_dir is not None else default_collab_cache_dir()
    if not folder.is_dir():
        return {}
    text, model_class = _read_config(config)
    digest = hashlib.sha256(text.encode()).hexdigest()
    found: dict[int, Path] = {}
    for record in sorted(folder.glob("*.json")):
        info = json.loads(record.read_text())
        if info.get("config_sha256") != digest or info.get("model") != model_class:
            continue
        seed = int(info["seed"])
        if seed in found:
            raise ValueError(f"{folder} holds two tables of {config} at seed {seed} ({found[seed].name}, "
                             f"{record.with_suffix('.npy').name}), for different training splits; "
                             "export one by its path.")
        found[seed] = record.with_suffix(".npy")
    return found


def export_item_table(cached: str | Path, dest: str | Path) -> Path:
    """Copy a cached table (``.npy``) and its record (``.json``) to ``dest`` (``.npy``; the record beside
    it), atomically, so that it can be kept where the cache is not (a results folder under version
    control); :func:`import_item_table` puts it back."""
    from recframe.checkpoint_io import atomic_write

    cached, dest = Path(cached), Path(dest)
    data, record = cached.read_bytes(), cached.with_suffix(".json").read_bytes()
    dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(dest.with_suffix(".json"), lambda fh: fh.write(record))
    atomic_write(dest, lambda fh: fh.write(data))
    return dest


def import_item_table(config: str | Path, stored: str | Path, cache_dir: str | Path | None = None) -> Path:
    """Put an exported table (:func:`export_item_table`) back in the collaborative cache of ``config``.

    The record must name this config's text (``config_sha256``) and model class: an edited config does
    not take an old table. The cache key is rebuilt from the record's seed and training-split
    fingerprint, so the table is only read by a run whose training data has that fingerprint, as a table
    trained here would be. Raises ``FileNotFoundError`` (table or record missing) or ``ValueError``
    (record of another config or model, or a table whose shape is not the record's).
    """
    stored = Path(stored)
    text, model_class = _read_config(config)
    if not stored.is_file() or not stored.with_suffix(".json").is_file():
        raise FileNotFoundError(f"{stored} or its record {stored.with_suffix('.json').name} is missing; "
                                "export both with recframe.features.collaborative.export_item_table.")
    info = json.loads(stored.with_suffix(".json").read_text())
    same_config = info.get("config_sha256") == hashlib.sha256(text.encode()).hexdigest()
    if not same_config or info.get("model") != model_class:
        raise ValueError(f"{stored} was trained from another version of {config} (config sha256 or model "
                         "class differ); retrain it (delete the stored table) instead of importing it.")
    table = np.load(stored, allow_pickle=False)
    if list(table.shape) != list(info.get("shape") or []):
        raise ValueError(f"{stored} has shape {list(table.shape)} but its record says {info.get('shape')}.")
    folder = Path(cache_dir) if cache_dir is not None else default_collab_cache_dir()
    extra = {k: v for k, v in info.items()
             if k not in ("seed", "config_sha256", "model", "train_fingerprint", "shape")}
    return _write_table(folder, text, int(info["seed"]), str(info["train_fingerprint"]), model_class, table,
                        {**extra, "imported_from": stored.name})


def _checkpoint_table(model: Any, ckpt: dict[str, Any], n_items: int, model_class: str) -> np.ndarray:
    """``model``'s item table with ``ckpt``'s weights, padding row zeroed; checks the shape."""
    import torch

    if not callable(getattr(model, "item_embeddings", None)):
        raise ValueError(f"model {model_class} has no item_embeddings(); use a model with an item table "
                         "(recframe.models.SASRec, LightGCN, BPRMF).")
    try:
        model.load_state_dict(ckpt["state_dict"])
    except (KeyError, RuntimeError) as exc:
        raise ValueError(f"the checkpoint does not fit {model_class} built from its config "
                         f"({type(exc).__name__}: {str(exc)[:200]}).") from None
    model.eval()
    with torch.no_grad():
        table = model.item_embeddings().detach().float().cpu().numpy().copy()
    if table.ndim != 2 or table.shape[0] != n_items + 1:
        raise ValueError(f"{model_class}.item_embeddings() returned shape {table.shape}; expected "
                         f"[{n_items + 1}, d].")
    table[0] = 0.0
    return np.ascontiguousarray(table, dtype=np.float32)


def hybrid_item_features(text: Any, collab: Any, collab_weight: float = 0.5) -> np.ndarray:
    """Per-block L2-normalised, weighted concatenation of text and collaborative item vectors.

    ``h_i = [ sqrt(1 - w) * t_i / ||t_i||,  sqrt(w) * c_i / ||c_i|| ]``, so ``||h_i||^2 = 1`` splits as
    ``(1 - w) : w`` between the blocks and squared Euclidean distances (what k-means and the RQ
    codebooks use) are ``(1 - w) * d_text + w * d_collab``. Normalising first makes ``w`` mean the same
    whatever the blocks' scales and widths (MiniLM rows are unit-norm; SASRec's are not). A zero row
    (the padding row) stays zero in its block. This is the simple early-fusion baseline; LETTER (Wang et
    al., 2024) instead regularises the RQ-VAE codes toward the CF embeddings (see
    :class:`recframe.tokenizers.RQVAETokenizer`), and ColaRec (Wang et al., 2024) aligns content and
    collaborative views with a contrastive objective in the generator.

    Args:
        text: ``[n_items + 1, d_t]`` (row 0 zeros), e.g. :func:`recframe.features.item_content_features`.
        collab: ``[n_items + 1, d_c]`` (row 0 zeros), e.g. :func:`collaborative_item_embeddings`.
        collab_weight: ``w`` in [0, 1]; 0 gives text only (plus a zero block), 1 collaborative only.

    Raises:
        ValueError: ``collab_weight`` outside [0, 1], different row counts, or an invalid matrix.
    """
    w = float(collab_weight)
    if not 0.0 <= w <= 1.0:
        raise ValueError(f"collab_weight must be in [0, 1]; got {collab_weight!r}.")
    t, c = as_feature_matrix(text), as_feature_matrix(collab)
    if t.shape[0] != c.shape[0]:
        raise ValueError(f"text has {t.shape[0] - 1} items but collab {c.shape[0] - 1}; both must be "
                         "[n_items + 1, d] for the same items.")
    out = np.concatenate([np.sqrt(1.0 - w) * _unit_rows(t), np.sqrt(w) * _unit_rows(c)], axis=1)
    return out.astype(np.float32)


def _unit_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x.astype(np.float64), axis=1, keepdims=True)
    return np.where(norms > 0, x / np.where(norms > 0, norms, 1.0), 0.0)


def _read_config(config: str | Path) -> tuple[str, str]:
    """``(file text, model class path)`` of a config; one clear error for a missing file or model."""
    path = Path(config)
    if not path.is_file():
        raise FileNotFoundError(f"config {config} not found; pass a recframe YAML config such as "
                                "configs/sasrec_ml100k.yaml (relative to the working directory).")
    text = path.read_text()
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"config {config} is not valid YAML ({exc}).") from None
    model = loaded.get("model") if isinstance(loaded, dict) else None
    model_class = model.get("class_path") if isinstance(model, dict) else None
    if not isinstance(model_class, str):
        raise ValueError(f"config {config} has no model.class_path; name a model with item_embeddings(), "
                         "e.g. recframe.models.SASRec.")
    return text, model_class


@contextmanager
def _run_folder(work_dir: str | Path | None) -> Iterator[Path]:
    """``work_dir`` (created), or a temporary directory removed after the block when it is None.

    A ``work_dir`` the block leaves without ``checkpoints/last.ckpt`` (a refusal before training) is removed:
    there is nothing in it to resume from."""
    if work_dir is not None:
        folder = Path(work_dir)
        folder.mkdir(parents=True, exist_ok=True)
        try:
            yield folder
        finally:
            if not (folder / "checkpoints" / "last.ckpt").is_file():
                shutil.rmtree(folder, ignore_errors=True)
        return
    with tempfile.TemporaryDirectory(prefix="recframe-collab-") as tmp:
        yield Path(tmp)


@contextmanager
def _restored_global_state() -> Iterator[None]:
    """Restore the global RNGs, ``PL_GLOBAL_SEED`` and torch's determinism flags after the block."""
    import torch

    py, np_state, torch_state = random.getstate(), np.random.get_state(), torch.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    env = {k: os.environ.get(k) for k in ("PL_GLOBAL_SEED", "PL_SEED_WORKERS", "CUBLAS_WORKSPACE_CONFIG")}
    det = torch.are_deterministic_algorithms_enabled()
    det_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    cudnn = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    try:
        yield
    finally:
        random.setstate(py)
        np.random.set_state(np_state)
        torch.set_rng_state(torch_state)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        torch.use_deterministic_algorithms(det, warn_only=det_warn)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = cudnn
