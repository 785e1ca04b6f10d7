"""``RecDataModule``: the one place where data becomes batches.

``source -> Interactions -> filters -> split -> batches``. Models never read
files; they ask for a training batch kind (``pairwise``, ``sequence`` or
``history``, see :mod:`recframe.data.batches`) through their ``train_batch``
class attribute, and receive evaluation batches with held-out targets and the
seen items to mask.

Evaluation protocol (set by ``split``):

* ``loo`` — leave-one-out; every held-out item is relevant (``relevance="all"``).
* ``ratio`` — per-user chronological ratio, *all* later interactions held out;
  conventional metrics count only liked items as relevant
  (``relevance="liked"``) and the signed metrics are reported too.

``metric_families`` adds metric families (e.g. calibration) to every evaluation
on this data, next to the standard and signed ones (see
:mod:`recframe.metrics.families`).

At validation the model sees the training history and ranks all items except
the training items; at test it sees training + validation and those are masked.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from recframe.config_checks import check_whole
from recframe.data.batches import (
    HistoryCollate,
    NegativeSampler,
    PairwiseCollate,
    SequenceCollate,
    SequenceWindows,
    pad_rows,
)
from recframe.data.cold_start import (
    ColdEvalSet,
    ColdItems,
    check_cold_settings,
    cold_eval_set,
    hold_out_cold_items,
)
from recframe.data.eval_view import EvaluationView
from recframe.data.interactions import DataError, Histories, Interactions
from recframe.data.splits import Split, make_split
from recframe.metrics.families import MetricFamily

logger = logging.getLogger("recframe.data")


class ShardSampler(DistributedSampler):
    """Evaluation shard of one process: indices ``rank, rank + world, ...`` with no padding.

    Lightning's default ``DistributedSampler`` pads every shard to equal length
    by repeating users, which would count those users twice in the metrics.
    Being a ``DistributedSampler`` subclass, this one is left in place by
    Lightning; shards may differ by one batch, which evaluation tolerates since
    the evaluator only synchronises its sums at the end of the epoch.
    """

    def __init__(self, n: int, num_replicas: int, rank: int) -> None:
        super().__init__(range(n), num_replicas=num_replicas, rank=rank, shuffle=False, drop_last=False)
        self.n = n

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, self.n, self.num_replicas))

    def __len__(self) -> int:
        return len(range(self.rank, self.n, self.num_replicas))


class EpochShuffle(DistributedSampler):
    """A permutation of ``range(n)`` that is a pure function of (seed, epoch), sharded by step.

    Lightning calls ``set_epoch`` before every training epoch. Unlike a
    ``RandomSampler`` drawing from the global generator, the order does not
    depend on how many random numbers were drawn before, so a run resumed from
    a checkpoint sees exactly the batches the uninterrupted run saw.

    Under DDP (``num_replicas`` > 1, ``batch_size`` per process) the permutation
    is cut into global batches of ``num_replicas * batch_size`` and rank ``r``
    takes positions ``r, r + R, ...`` of each. The ranks of one step therefore
    see together exactly the batch a single process with batch size
    ``R * batch_size`` sees, which (with :meth:`RecModel.training_step`'s
    global-count loss scaling) makes DDP training follow the single-process run.
    A final global batch smaller than ``R`` is dropped (at most ``R - 1`` rows per
    epoch), because every rank must run the same number of steps.
    Being a ``DistributedSampler`` subclass, Lightning leaves it in place.
    """

    def __init__(self, n: int, seed: int, batch_size: int = 1, num_replicas: int = 1, rank: int = 0) -> None:
        super().__init__(range(n), num_replicas=num_replicas, rank=rank, shuffle=False, drop_last=False)
        self.n, self.seed, self.epoch, self.batch_size = n, seed, 0, batch_size
        step = num_replicas * batch_size
        tail = n % step
        self.usable = n - tail if 0 < tail < num_replicas else n

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        perm = torch.randperm(self.n, generator=gen)[: self.usable]
        if self.num_replicas == 1:
            return iter(perm.tolist())
        step = self.num_replicas * self.batch_size
        mine = [perm[start:start + step][self.rank::self.num_replicas]
                for start in range(0, self.usable, step)]
        return iter(torch.cat(mine).tolist())

    def __len__(self) -> int:
        if self.num_replicas == 1:
            return self.usable
        step = self.num_replicas * self.batch_size
        full, tail = divmod(self.usable, step)
        return full * self.batch_size + len(range(self.rank, tail, self.num_replicas))


class _Indices(Dataset):
    """A dataset of integers; batches are built by a vectorised collate function."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


@dataclass(frozen=True)
class EvalSet:
    """Held-out targets and model inputs for one evaluation stage.

    ``users`` are the users with at least one held-out item; ``known`` is the
    CSR history the model may use (and whose items are masked); ``heldout``
    the CSR of targets with their labels.
    """

    users: np.ndarray
    known: Histories
    heldout: Histories

    def batch(self, idx: list[int], max_len: int) -> dict[str, torch.Tensor]:
        """Padded tensors for the users at positions ``idx`` of ``users``."""
        users = self.users[np.asarray(idx, dtype=np.int64)]
        known = self.known
        hist = pad_rows(known.indptr, known.items, users, max_len)
        seen = pad_rows(known.indptr, known.items, users)
        targets = pad_rows(self.heldout.indptr, self.heldout.items, users, left=False)
        labels = pad_rows(self.heldout.indptr, self.heldout.labels, users, left=False)
        return {
            "users": torch.from_numpy(users),
            "history": torch.from_numpy(hist),
            "seen": torch.from_numpy(seen),
            "targets": torch.from_numpy(targets),
            "labels": torch.from_numpy(labels.astype(np.int8)),
        }


def load_source(dataset: str, root: str, columns: dict[str, str] | None,
                synthetic: dict[str, Any] | None) -> Interactions:
    """Resolve ``dataset`` to :class:`Interactions`.

    ``"synthetic"`` uses :func:`recframe.data.synthetic.make_synthetic` with
    the ``synthetic`` keyword arguments (``"synthetic-long"``:
    :func:`recframe.data.synthetic_long.make_long_history`; ``"synthetic-interests"``:
    :func:`recframe.data.synthetic_interests.make_interest_revisits`); a catalogued name (``"ml-100k"``)
    loads the prepared copy under ``root``; a directory loads RecBole atomic
    files; a ``.csv``/``.tsv``/``.parquet`` file loads with the ``columns`` map.
    """
    if dataset == "synthetic":
        from recframe.data.synthetic import make_synthetic

        return make_synthetic(**(synthetic or {})).interactions
    if dataset == "synthetic-long":
        from recframe.data.synthetic_long import make_long_history

        return make_long_history(**(synthetic or {})).interactions
    if dataset == "synthetic-interests":
        from recframe.data.synthetic_interests import make_interest_revisits

        return make_interest_revisits(**(synthetic or {})).interactions
    path = Path(dataset)
    if path.is_dir() or (path.suffix.lower() == ".inter" and path.is_file()):
        from recframe.data.sources import load_atomic

        return load_atomic(path, columns=columns)
    if _looks_like_path(dataset) and not path.exists():
        raise DataError(f"data.dataset: {dataset} not found (no such file or directory); give an existing "
                        "directory of atomic files, a .inter/.csv/.tsv/.parquet file, or a catalogued name "
                        "(recframe data list).")
    if path.suffix.lower() in {".csv", ".tsv", ".parquet", ".txt"}:
        from recframe.data.sources import load_table

        if not path.exists():
            raise DataError(f"data file {path} does not exist; check data.dataset in the config.")
        if not columns:
            raise DataError(f"{path}: a table needs data.columns mapping user/item (and optionally "
                            "rating/timestamp) to column names.")
        return load_table(path, columns)
    from recframe.data import catalog

    return catalog.load(dataset, root)


def _looks_like_path(dataset: str) -> bool:
    """A ``data.dataset`` value meant as a path (catalogued names hold no separators or file suffixes)."""
    path = Path(dataset)
    return ("/" in dataset or "\\" in dataset or dataset.startswith((".", "~"))
            or path.suffix.lower() in {".inter", ".csv", ".tsv", ".parquet", ".txt"})


def check_eval_ks(eval_ks: Any) -> list[int]:
    """``data.eval_ks`` as a list of positive ints; anything else is one clear :class:`DataError`."""
    ks = list(eval_ks)
    if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise DataError(f"data.eval_ks must be a non-empty list of whole numbers >= 1 (the metric cut-offs), "
                        f"got {ks}; e.g. eval_ks: [10, 20].")
    return ks


class RecDataModule(L.LightningDataModule):
    """Loads, filters and splits one dataset and serves every batch kind.

    Args:
        dataset: catalogued name (``ml-100k``), ``synthetic``, a directory of
            RecBole atomic files (or its ``.inter`` file), or a CSV/TSV/Parquet file.
            A path that does not exist is refused as not found.
        root: dataset cache directory for catalogued datasets (env ``RECFRAME_DATA`` overrides).
        columns: column map for tables/atomic files (``user``, ``item``, ``rating``, ``timestamp``).
        synthetic: keyword arguments for the synthetic generator.
        split: ``loo`` (leave-one-out) or ``ratio`` (chronological ratio, signed protocol).
        ratio: train and validation shares for ``ratio``.
        user_k: k-core threshold on users (0 = off).
        item_k: k-core threshold on items (0 = off).
        like_threshold: rating at or above which an interaction is liked (+1).
        dislike_threshold: rating at or below which it is disliked (-1).
        duplicates: exact duplicate rows (same user, item and timestamp): ``drop`` (default) keeps
            the first copy and logs how many went, so a held-out event cannot also sit in the
            user's training history; ``keep`` keeps every copy (logged as a warning).
            See :func:`recframe.data.filters.drop_exact_duplicates`.
        max_len: history length fed to sequential models, >= 1 (the CLI links it to the model's
            ``max_len``, so a config sets it once, here).
        window_stride: for sequence models, how far consecutive training windows of one user
            are apart (default ``max_len``: no overlap). A smaller stride gives every target at
            least ``max_len - window_stride + 1`` items of context (see ``SequenceWindows.build``).
        batch_size: training batch size, >= 1.
        eval_batch_size: users per evaluation chunk, >= 1 (metrics do not depend on it).
        eval_ks: cut-offs for every metric, whole numbers >= 1.
        signed_lambda: penalty weight of a disliked hit in signed metrics.
        metric_families: extra metric families the evaluator streams for every
            model on this data (in YAML a list of ``{class_path, init_args}``);
            the standard and signed metrics are always there.
        num_workers: DataLoader workers, >= 0 (0 keeps runs bit-reproducible on CPU).
        cold_items: hold a set of items out of the data entirely (cold-start protocol,
            :mod:`recframe.data.cold_start`): ``{fraction: 0.1, seed: 0, min_interactions: 1,
            min_history: 1}`` (any key may be left out). Every split is built from the warm rows;
            :meth:`cold_eval_set` gives the cold test cases. ``None`` (default): off.

    Raises:
        SettingError: (:mod:`recframe.config_checks`) for a length, batch size, worker count or
            k-core threshold out of range, before any data loads.
    """

    def __init__(
        self,
        dataset: str = "ml-100k",
        root: str = "datasets",
        columns: dict[str, str] | None = None,
        synthetic: dict[str, Any] | None = None,
        split: Literal["loo", "ratio"] = "loo",
        ratio: tuple[float, float] = (0.8, 0.1),
        user_k: int = 0,
        item_k: int = 0,
        like_threshold: float = 4.0,
        dislike_threshold: float = 2.0,
        duplicates: Literal["drop", "keep"] = "drop",
        max_len: int = 50,
        window_stride: int | None = None,
        batch_size: int = 256,
        eval_batch_size: int = 1024,
        eval_ks: list[int] | None = None,
        signed_lambda: float = 1.0,
        metric_families: list[MetricFamily] | None = None,
        num_workers: int = 0,
        cold_items: dict[str, Any] | None = None,
    ) -> None:
        # plain settings first, so a bad value is refused before anything loads
        owner = type(self).__name__
        check_whole(owner, "max_len", max_len, 1, "the history length fed to sequential models", "data.")
        check_whole(owner, "batch_size", batch_size, 1, "training rows per batch", "data.")
        check_whole(owner, "eval_batch_size", eval_batch_size, 1, "users per evaluation chunk", "data.")
        check_whole(owner, "num_workers", num_workers, 0, "DataLoader processes; 0 loads in-process", "data.")
        check_whole(owner, "user_k", user_k, 0, "the k-core threshold on users; 0 is off", "data.")
        check_whole(owner, "item_k", item_k, 0, "the k-core threshold on items; 0 is off", "data.")
        super().__init__()
        # families are objects: the checkpoint keeps the resolved config instead (weights_only loading)
        self.save_hyperparameters(ignore=["metric_families"])
        self.dataset = dataset
        self.root = root
        self.columns = columns
        self.synthetic = synthetic
        self.split_name = split
        self.ratio = tuple(ratio)
        self.user_k, self.item_k = user_k, item_k
        self.like_threshold, self.dislike_threshold = like_threshold, dislike_threshold
        if duplicates not in ("drop", "keep"):
            raise DataError(f"data.duplicates must be 'drop' or 'keep', got {duplicates!r}.")
        self.duplicates = duplicates
        self.max_len = max_len
        if window_stride is not None and not 1 <= window_stride <= max_len:
            raise DataError(f"data.window_stride must be between 1 and data.max_len={max_len}, got "
                            f"{window_stride}; leave it out for non-overlapping windows.")
        self.window_stride = window_stride
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.eval_ks = check_eval_ks(eval_ks if eval_ks is not None else [10, 20])
        self.signed_lambda = signed_lambda
        self.metric_families = list(metric_families or [])
        self.num_workers = num_workers
        self.cold_items = check_cold_settings(cold_items)
        self._cold: ColdItems | None = None
        self._split: Split | None = None

    # ------------------------------------------------------------------ data
    @property
    def split(self) -> Split:
        """The train/valid/test views (loaded on first use)."""
        if self._split is None:
            self._split = self._build_split()
        return self._split

    def _build_split(self) -> Split:
        from recframe.data.filters import drop_exact_duplicates, exact_duplicates, k_core, signed_labels

        root = os.environ.get("RECFRAME_DATA", self.root)
        inter = load_source(self.dataset, root, self.columns, self.synthetic)
        if self.duplicates == "drop":
            inter = drop_exact_duplicates(inter)
        elif (n_dup := int(exact_duplicates(inter).sum())) > 0:
            logger.warning("%s: keeping %d exact duplicate (user, item, timestamp) rows (data.duplicates: "
                           "keep); a held-out copy can also sit in the user's training history.",
                           self.dataset, n_dup)
        if self.user_k > 0 or self.item_k > 0:
            inter = k_core(inter, user_k=self.user_k, item_k=self.item_k)
        inter = signed_labels(inter, like_threshold=self.like_threshold,
                              dislike_threshold=self.dislike_threshold)
        if self.cold_items is not None:
            inter, self._cold = hold_out_cold_items(inter, **self.cold_items)
            logger.info("%s: %d cold items held out with their %d interactions", self.dataset,
                        len(self._cold.items), len(self._cold.removed))
        return make_split(inter, self.split_name, ratio=self.ratio)

    def cold_eval_set(self) -> ColdEvalSet:
        """The cold-start test cases (:mod:`recframe.data.cold_start`); needs ``cold_items``."""
        if self.cold_items is None:
            raise DataError("cold_eval_set needs data.cold_items (e.g. {fraction: 0.1, seed: 0}).")
        sp = self.split
        warm = sp.train.concat(sp.valid).concat(sp.test)
        return cold_eval_set(warm, self._cold, min_history=self.cold_items["min_history"])

    @property
    def n_items(self) -> int:
        """Number of real items; score matrices have ``n_items + 1`` columns."""
        return self.split.train.n_items

    @property
    def n_users(self) -> int:
        """Number of real users."""
        return self.split.train.n_users

    @property
    def fingerprint(self) -> str:
        """Hash of the data rows and every setting that changes what the model sees."""
        keys = {k: self.hparams[k] for k in ("split", "ratio", "user_k", "item_k", "like_threshold",
                                             "dislike_threshold", "max_len")}
        h = hashlib.sha256(self.split.train.fingerprint.encode())
        h.update(self.split.valid.fingerprint.encode())
        h.update(self.split.test.fingerprint.encode())
        if self.window_stride is not None:  # only when set, so older checkpoints keep their fingerprint
            keys["window_stride"] = self.window_stride
        h.update(json.dumps(keys, sort_keys=True, default=str).encode())
        return h.hexdigest()[:16]

    @property
    def protocol(self) -> dict[str, Any]:
        """Evaluator settings implied by the split (see module docstring)."""
        signed = self.split_name == "ratio"
        return {"ks": self.eval_ks, "signed": signed, "signed_lambda": self.signed_lambda,
                "relevance": "liked" if signed else "all", "families": list(self.metric_families)}

    def eval_set(self, stage: Literal["valid", "test"]) -> EvalSet:
        """Targets, inputs and masks for validation or test."""
        sp = self.split
        known = sp.train if stage == "valid" else sp.train.concat(sp.valid)
        heldout = sp.valid if stage == "valid" else sp.test
        users = np.flatnonzero(heldout.histories.lengths() > 0)
        return EvalSet(users=users, known=known.histories, heldout=heldout.histories)

    def eval_view(self, stage: Literal["valid", "test"]) -> EvaluationView:
        """The read-only data of one evaluation stage that callbacks use instead of ``split``.

        Its ``batches()`` are built exactly like :meth:`val_dataloader` / :meth:`test_dataloader`
        batches (see :class:`~recframe.data.eval_view.EvaluationView`).
        """
        if stage not in ("valid", "test"):
            raise DataError(f"eval_view stage must be 'valid' or 'test', got {stage!r}.")
        train = self.split.train
        return EvaluationView(stage, self.eval_set(stage), n_items=self.n_items, n_users=self.n_users,
                              max_len=self.max_len, batch_size=self.eval_batch_size,
                              user_ids=train.user_ids, item_ids=train.item_ids,
                              item_features=train.item_features, item_popularity=train.item_popularity())

    def setup(self, stage: str | None = None) -> None:
        _ = self.split

    # ------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict[str, Any]:
        """What serving needs, stored in every checkpoint (Lightning calls this when saving).

        Raw id maps, item titles, every user's full time-ordered history over
        train + valid + test (CSR; the items ``exclude_seen`` removes and the
        input of sequential models), item popularity over the same rows (the
        cold-start fallback), ``max_len`` and the data fingerprint. All tensors,
        strings and lists, so the checkpoint still loads with ``weights_only=True``.
        """
        sp = self.split
        full = sp.train.concat(sp.valid).concat(sp.test)
        hist = full.histories
        feats = full.item_features
        titles = None if feats is None or feats.title is None else [str(t) for t in feats.title]
        return {
            "fingerprint": self.fingerprint,
            "dataset": str(self.dataset),
            "max_len": int(self.max_len),
            "user_ids": [str(u) for u in full.user_ids],
            "item_ids": [str(i) for i in full.item_ids],
            "item_titles": titles,
            "seen_indptr": torch.from_numpy(np.asarray(hist.indptr, dtype=np.int64)),
            "seen_items": torch.from_numpy(np.asarray(hist.items, dtype=np.int64)),
            "popularity": torch.from_numpy(
                np.bincount(full.item, minlength=full.n_items + 1).astype(np.int64)),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """On resume, refuse a checkpoint trained on different data or data settings."""
        saved = state_dict.get("fingerprint")
        if saved and saved != self.fingerprint:
            raise DataError(
                f"the checkpoint was trained on data with fingerprint {saved} but data.dataset="
                f"{self.dataset!r} with these settings gives {self.fingerprint}; resume with the config the "
                "run was started with (the checkpoint's config is under checkpoint['recframe']['config']).")

    # ----------------------------------------------------------- dataloaders
    def _train_kind(self) -> str:
        trainer = getattr(self, "trainer", None)
        module = getattr(trainer, "lightning_module", None) if trainer is not None else None
        return getattr(module, "train_batch", "pairwise")

    def train_dataloader(self) -> DataLoader:
        kind = self._train_kind()
        train = self.split.train
        hist = train.histories
        collate: PairwiseCollate | SequenceCollate | HistoryCollate
        if kind == "pairwise":
            collate = PairwiseCollate(train.user, train.item, NegativeSampler(hist, train.n_items))
        elif kind == "sequence":
            windows = SequenceWindows.build(hist, self.max_len, self.window_stride)
            collate = SequenceCollate(hist.items, windows, self.max_len)
        elif kind == "history":
            collate = HistoryCollate(hist, np.flatnonzero(hist.lengths() > 0), self.max_len)
        else:
            raise DataError(f"unknown train_batch kind {kind!r}; use pairwise, sequence or history.")
        seed = int(os.environ.get("PL_GLOBAL_SEED", 0))  # set by seed_everything
        # the loader's own generator seeds worker processes, leaving the global one untouched
        trainer = getattr(self, "trainer", None)
        world, rank = (trainer.world_size, trainer.global_rank) if trainer is not None else (1, 0)
        sampler = EpochShuffle(len(collate), seed, self.batch_size, num_replicas=world, rank=rank)
        return DataLoader(_Indices(len(collate)), batch_size=self.batch_size, sampler=sampler,
                          collate_fn=collate, num_workers=self.num_workers,
                          generator=torch.Generator().manual_seed(seed))

    def _eval_loader(self, stage: Literal["valid", "test"]) -> DataLoader:
        es = self.eval_set(stage)
        trainer = getattr(self, "trainer", None)
        sampler = None
        if trainer is not None and trainer.world_size > 1:
            sampler = ShardSampler(len(es.users), trainer.world_size, trainer.global_rank)
        return DataLoader(_Indices(len(es.users)), batch_size=self.eval_batch_size, sampler=sampler,
                          collate_fn=partial(es.batch, max_len=self.max_len), num_workers=self.num_workers)

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("valid")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")
