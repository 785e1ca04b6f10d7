"""``Recommender``: top-K recommendations from a trained checkpoint, in raw ids.

    rec = Recommender.from_checkpoint("runs/.../checkpoints/best-epoch=64-val_ndcg=0.1172.ckpt")
    out = rec.recommend(users=["196", "186"], k=10)              # known users
    out = rec.recommend(histories=[["242", "302", "377"]], k=10)  # any history (sequential models)
    print(out.to_frame())

What a checkpoint holds (written by every ``recframe fit``): the model's class and
hyperparameters, its weights, and the datamodule's serving data (raw id maps,
item titles, every user's time-ordered history over train + valid + test, item
popularity; :meth:`RecDataModule.state_dict`). Nothing else is read: the
dataset files need not be present.

Scoring. Embedding models (``score = query · items``) are served from a FAISS
:class:`~recframe.retrieval.ItemIndex` built from ``item_embeddings()``
(exact ``"Flat"`` by default, so the scores are the model's own ``score`` up to
float summation order); the index is saved next to the checkpoint
(``best.ckpt`` → ``best.faiss``) and rebuilt when it is missing or stale. Other
models are scored over the full catalogue with ``score`` and a masked top-k.
Either way the ranking is the one the full-ranking evaluator measures.

Inputs. ``users`` are raw user ids of the training data; the model sees the
user's whole known history (its last ``max_len`` items for sequential models).
``histories`` are lists of raw item ids, oldest first, and need a model whose
``score`` reads histories (``uses_history``, e.g. SASRec).

``users="196"`` (a bare string or integer) is one user.

``k`` must be an int >= 1 and is capped at the number of real items before anything is
allocated; rows with fewer eligible items come back shorter.

``exclude_seen=True`` removes every item the user interacted with in the data
the checkpoint was built from (for ``histories``: the items of the history).
The padding id is never served, and a model that scores a real item NaN or
+/-inf raises :class:`~recframe.metrics.ranking.NonFiniteScoresError` naming
the model and the users (:func:`~recframe.metrics.topk.masked_top_k`).

Decoding. ``decode="exact"`` (default) ranks the full catalogue by ``score``.
Generative models (those with ``generate(history, k, beam)``, e.g. TIGER) can
instead be served by trie-constrained beam search, ``decode="beam", beam=B``:
every answer is a valid item of the trie, and with ``B`` at least the catalogue
size the answer equals exact scoring's top-k. Seen items are removed after the
search, so the search is asked for ``k`` plus the most excluded items of a row
in the batch (and the beam widened to hold them); nothing of catalogue size is
allocated per row.

Unknown ids. By default an unknown user or history item raises
:class:`UnknownIdError` naming it, and an empty history raises ``ValueError``.
With ``cold_start="popularity"`` an unknown user, or a history with no known
item (or none at all), gets the most popular items instead
(``Recommendations.fallback`` marks those rows); unknown items inside an
otherwise known history are dropped.

Threads. ``recommend`` may be called from several threads at once: the model
is in eval mode under ``torch.inference_mode`` and FAISS CPU searches are
read-only; the only shared mutable state (search knobs) is guarded by a lock.
"""

from __future__ import annotations

import importlib
import logging
import numbers
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from recframe.checkpoint_io import CheckpointError, load_checkpoint
from recframe.data.batches import pad_rows
from recframe.metrics.topk import TopK, check_finite_rows, check_k, masked_top_k

logger = logging.getLogger("recframe.serving")

SERVING_KEY = "RecDataModule"  # Lightning stores a datamodule's state_dict under its class name

#: ``recommend(decode=...)`` choices: full-catalogue ``score`` or trie beam search (generative models)
DECODES = ("exact", "beam")
#: beam width of ``decode="beam"`` when none is given
DEFAULT_BEAM = 20


class UnknownIdError(KeyError):
    """A raw user or item id that the checkpoint's data does not contain."""

    def __str__(self) -> str:  # KeyError would print the message with quotes
        return str(self.args[0])


@dataclass(frozen=True)
class Recommendations:
    """The answer of :meth:`Recommender.recommend`, one row per requested user/history.

    Attributes:
        queries: the raw user id of each row, or ``"history[i]"``.
        items: raw item ids per row, best first (shorter than ``k`` when fewer items were eligible).
        scores: the model's score of each item (popularity counts on fallback rows).
        titles: item titles per row, when the data has titles.
        fallback: rows answered by the popularity cold-start fallback.
    """

    queries: list[str]
    items: list[list[str]]
    scores: list[list[float]]
    titles: list[list[str]] | None
    fallback: list[bool]

    def __len__(self) -> int:
        return len(self.queries)

    def to_frame(self) -> Any:
        """A long pandas DataFrame: ``query, rank, item, score[, title], fallback``."""
        import pandas as pd

        rows = []
        for r, query in enumerate(self.queries):
            for rank, (item, score) in enumerate(zip(self.items[r], self.scores[r]), start=1):
                row = {"query": query, "rank": rank, "item": item, "score": score}
                if self.titles is not None:
                    row["title"] = self.titles[r][rank - 1]
                row["fallback"] = self.fallback[r]
                rows.append(row)
        return pd.DataFrame(rows)


class Recommender:
    """Serve a trained model: raw ids in, top-k raw item ids and scores out.

    Build it with :meth:`from_checkpoint`. The constructor takes the pieces
    directly (a model in eval mode, the serving dict of
    :meth:`RecDataModule.state_dict`, and an optional index).
    """

    def __init__(self, model: torch.nn.Module, serving: dict[str, Any], index: Any = None) -> None:
        self.model = model.eval()
        self.index = index
        self.user_ids: list[str] = list(serving["user_ids"])
        self.item_ids: list[str] = list(serving["item_ids"])
        self.titles: list[str] | None = serving.get("item_titles")
        self.max_len = int(serving["max_len"])
        self.fingerprint = str(serving.get("fingerprint", ""))
        self.seen_indptr = serving["seen_indptr"].numpy()
        self.seen_items = serving["seen_items"].numpy()
        self.popularity = serving["popularity"].numpy()
        self._user_index = {raw: u for u, raw in enumerate(self.user_ids) if u > 0}
        self._item_index = {raw: i for i, raw in enumerate(self.item_ids) if i > 0}
        self._lock = threading.Lock()
        if len(self.item_ids) - 1 != model.n_items:
            raise CheckpointError(f"the model has {model.n_items} items but the serving data has "
                                  f"{len(self.item_ids) - 1}; the checkpoint is inconsistent, retrain.")

    # ----------------------------------------------------------- loading
    @classmethod
    def from_checkpoint(cls, path: str | Path, *, index: str | None = "Flat", rebuild_index: bool = False,
                        nprobe: int | None = None, ef_search: int | None = None) -> Recommender:
        """Restore model, id maps and (for embedding models) the FAISS index from a checkpoint.

        Args:
            path: a checkpoint written by ``recframe fit``.
            index: FAISS factory string of the index (``"Flat"`` exact; ``"HNSW32"``, ``"IVF256,Flat"``
                approximate); ``None`` scores the full catalogue with the model instead.
            rebuild_index: rebuild even if a matching index file exists next to the checkpoint.
            nprobe, ef_search: search knobs of IVF / HNSW indexes.
        """
        path = Path(path)
        ckpt = load_checkpoint(path)
        meta, serving = ckpt.get("recframe"), ckpt.get(SERVING_KEY)
        if not meta or not serving or "item_ids" not in serving:
            raise CheckpointError(f"checkpoint {path} has no recframe serving data (model class, id maps); "
                                  "it was not written by `recframe fit` of this version. Retrain with "
                                  "`recframe fit --config ...` to get a servable checkpoint.")
        model = _restore_model(meta["model_class"], ckpt, path)
        item_index = None
        if index is not None and callable(getattr(model, "item_embeddings", None)):
            item_index = _index_for(model, path, index, rebuild_index, nprobe, ef_search)
        return cls(model, serving, item_index)

    # -------------------------------------------------------- recommending
    def recommend(self, users: Sequence[Any] | str | int | None = None,
                  histories: Sequence[Sequence[Any]] | None = None, k: int = 10, exclude_seen: bool = True,
                  cold_start: Literal["error", "popularity"] = "error", batch_size: int = 1024,
                  decode: Literal["exact", "beam"] = "exact", beam: int | None = None) -> Recommendations:
        """Top-``k`` items for raw ``users`` or for raw-id ``histories`` (exactly one of the two).

        Args:
            users: raw user ids of the checkpoint's data; a bare string or integer is one user.
            histories: lists of raw item ids, oldest first (sequential models only).
            k: items per row, an int >= 1, capped at the number of real items.
            exclude_seen: drop the user's known items (or the history's items).
            cold_start: ``"error"`` raises :class:`UnknownIdError` on an unknown id and ``ValueError`` on an
                empty history; ``"popularity"`` answers unknown users (and histories without any known item)
                with popular items.
            batch_size: rows scored per model call.
            decode: ``"exact"`` ranks the full catalogue by ``score``; ``"beam"`` serves a generative model
                (one with ``generate(history, k, beam)``) by trie-constrained beam search.
            beam: beam width for ``decode="beam"`` (default :data:`DEFAULT_BEAM`), an int >= 1.

        Raises:
            ValueError: bad arguments (each named), an empty history, or ``decode="beam"`` on a model
                without ``generate``.
            UnknownIdError: an unknown id with ``cold_start="error"``.
            NonFiniteScoresError: the model scored a real item NaN or +/-inf (names the model and users).
        """
        if (users is None) == (histories is None):
            raise ValueError("recommend needs exactly one of users=[raw user ids] or "
                             "histories=[[raw item ids]].")
        k = min(check_k(k), len(self.item_ids) - 1)  # before anything is allocated
        batch_size = check_k(batch_size, "batch_size")
        if cold_start not in ("error", "popularity"):
            raise ValueError(f"cold_start={cold_start!r}; use 'error' or 'popularity'.")
        beam = self._beam_width(decode, beam)
        if users is not None:
            if isinstance(users, bytes):
                users = users.decode()
            if isinstance(users, (str, numbers.Integral)):
                users = [users]  # one user, not its characters
            queries = [str(u) for u in users]
            dense, rows = self._users_to_rows(queries, cold_start)
        else:
            if isinstance(histories, (str, bytes)):
                raise ValueError("histories is one string; pass a list of histories, each a list of raw item "
                                 "ids, oldest first: histories=[['242', '302']].")
            if not self.model.uses_history:
                raise ValueError(f"{type(self.model).__name__} scores by user id and cannot score an "
                                 "arbitrary history; pass users=[raw user ids], or serve a sequential "
                                 "model (SASRec).")
            queries = [f"history[{i}]" for i in range(len(histories))]
            dense, rows = self._histories_to_rows(histories, cold_start)
        known = [i for i, r in enumerate(rows) if r is not None]
        items = np.zeros((len(rows), k), dtype=np.int64)
        scores = np.full((len(rows), k), -np.inf, dtype=np.float32)
        counts = np.zeros(len(rows), dtype=np.int64)
        for start in range(0, len(known), batch_size):
            part = known[start:start + batch_size]
            it, sc, ct = self._score_rows(dense[part], [rows[i] for i in part], [queries[i] for i in part],
                                          k, exclude_seen, beam)
            items[part], scores[part], counts[part] = it, sc, ct
        fallback = [r is None for r in rows]
        for i in np.flatnonzero(fallback):
            items[i], scores[i], counts[i] = self._popular(k)
        return self._answer(queries, items, scores, counts, fallback)

    @property
    def can_beam(self) -> bool:
        """Whether the model can be served with ``decode="beam"`` (it has ``generate(history, k, beam)``)."""
        return callable(getattr(self.model, "generate", None))

    # ------------------------------------------------------------ internals
    def _beam_width(self, decode: str, beam: int | None) -> int | None:
        """The beam width of a ``decode="beam"`` call, ``None`` for exact decoding; bad settings raise."""
        if decode not in DECODES:
            raise ValueError(f"decode={decode!r}; use one of {list(DECODES)}.")
        if decode == "exact":
            if beam is not None:
                raise ValueError(f"beam={beam!r} applies only to decode='beam'; drop it or pass "
                                 "decode='beam'.")
            return None
        if not self.can_beam:
            raise ValueError(f"{type(self.model).__name__} has no trie-constrained generate(); decode='beam' "
                             "serves generative models (TIGER, SIDDecoder). Use decode='exact'.")
        return check_k(DEFAULT_BEAM if beam is None else beam, "beam")

    def _users_to_rows(self, queries: list[str], cold_start: str
                       ) -> tuple[np.ndarray, list[np.ndarray | None]]:
        dense = np.zeros(len(queries), dtype=np.int64)
        rows: list[np.ndarray | None] = []
        for i, raw in enumerate(queries):
            u = self._user_index.get(raw)
            if u is None:
                if cold_start == "error":
                    raise UnknownIdError(f"unknown user {raw!r}: the checkpoint's data has no such user id; "
                                         "pass cold_start='popularity' (CLI: --cold-start popularity) "
                                         "to answer unknown users with popular items.")
                rows.append(None)
                continue
            dense[i] = u
            rows.append(self.seen_items[self.seen_indptr[u]:self.seen_indptr[u + 1]])
        return dense, rows

    def _histories_to_rows(self, histories: Sequence[Sequence[Any]], cold_start: str
                           ) -> tuple[np.ndarray, list[np.ndarray | None]]:
        rows: list[np.ndarray | None] = []
        for h, history in enumerate(histories):
            if isinstance(history, (str, bytes)):
                raise ValueError(f"histories[{h}] is a string; pass a list of raw item ids per history.")
            ids = []
            for raw in history:
                i = self._item_index.get(str(raw))
                if i is None:
                    if cold_start == "error":
                        raise UnknownIdError(f"unknown item {str(raw)!r} in histories[{h}]; pass only "
                                             "item ids of the checkpoint's data, or "
                                             "cold_start='popularity' to drop unknown items.")
                    continue
                ids.append(i)
            if not ids and not len(history) and cold_start == "error":
                raise ValueError(f"histories[{h}] is empty; pass at least one raw item id, or "
                                 "cold_start='popularity' (CLI: --cold-start popularity) to answer empty "
                                 "histories with popular items.")
            rows.append(np.asarray(ids, dtype=np.int64) if ids else None)
        return np.zeros(len(rows), dtype=np.int64), rows

    def _score_rows(self, users: np.ndarray, rows: list[np.ndarray], names: list[str], k: int,
                    exclude_seen: bool, beam: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
        flat = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        exclude = (indptr, flat) if exclude_seen else None
        batch = {"users": torch.from_numpy(users),
                 "history": torch.from_numpy(pad_rows(indptr, flat, np.arange(len(rows)), self.max_len))}
        model_name = type(self.model).__name__
        with torch.inference_mode():
            if beam is not None:
                top = self._beam_top_k(batch["history"], exclude, k, beam, names)
            elif self.index is not None:
                query = self.model.query_embedding(batch).float().cpu()
                check_finite_rows(query, model_name=model_name, users=names, first_column=0,
                                  what="query embeddings")
                with self._lock if self.index.on_gpu else _NO_LOCK:
                    # rows are trimmed to their counts in _answer: a short row is not worth a warning
                    res = self.index.search(query.numpy(), k, exclude=exclude, warn_short=False)
                return res.items, res.scores, res.counts
            else:
                top = masked_top_k(self.model.score(batch).float().cpu(), k, exclude=exclude,
                                   model_name=model_name, users=names)
        return top.items.numpy(), top.scores.numpy(), top.valid.sum(dim=1).numpy()

    def _beam_top_k(self, history: torch.Tensor, exclude: tuple[np.ndarray, np.ndarray] | None, k: int,
                    beam: int, names: list[str]) -> TopK:
        """Top-``k`` by the model's trie beam search, seen items removed (module docstring, Decoding).

        The search returns ``fetch = k + max excluded items of a row`` hypotheses (at most the catalogue), so
        that ``k`` remain after exclusion. Its ``[B, fetch]`` list is ranked by the one masked top-K with the
        list positions as columns (position ``j`` is column ``j + 1``; excluded items and empty slots at
        ``-inf``), so nothing of catalogue size is allocated; NaN/+inf log-probabilities raise.
        """
        n_items, model_name = len(self.item_ids) - 1, type(self.model).__name__
        extra = int(np.diff(exclude[0]).max()) if exclude is not None and len(exclude[0]) > 1 else 0
        fetch = min(n_items, k + extra)
        found = self.model.generate(history, k=fetch, beam=max(beam, fetch))
        items, log_probs = found.items.cpu().long(), found.log_probs.cpu().float()
        check_finite_rows(log_probs, model_name=model_name, users=names, first_column=0, masked_scores=True,
                          what="beam log-probabilities")
        drop = items == 0
        if exclude is not None:
            indptr, flat = exclude
            stride = n_items + 1  # one key per (row, item)
            seen_keys = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr)) * stride + flat
            keys = np.arange(items.shape[0])[:, None] * stride + items.numpy()
            drop |= torch.from_numpy(np.isin(keys, seen_keys))
        by_position = torch.cat([torch.full((items.shape[0], 1), float("-inf")),
                                 log_probs.masked_fill(drop, float("-inf"))], dim=1)
        top = masked_top_k(by_position, k, model_name=model_name, users=names, masked_scores=True)
        chosen = items.gather(1, (top.items - 1).clamp(min=0)).masked_fill(~top.valid, 0)
        return TopK(chosen, top.scores, top.valid)

    def _popular(self, k: int) -> tuple[np.ndarray, np.ndarray, int]:
        counts = self.popularity.astype(np.float64).copy()
        counts[0] = -np.inf
        order = np.argsort(-counts, kind="stable")[:k]
        n = min(k, len(self.item_ids) - 1)
        items = np.zeros(k, dtype=np.int64)
        scores = np.full(k, -np.inf, dtype=np.float32)
        items[:n], scores[:n] = order[:n], counts[order[:n]]
        return items, scores, n

    def _answer(self, queries: list[str], items: np.ndarray, scores: np.ndarray, counts: np.ndarray,
                fallback: list[bool]) -> Recommendations:
        raw_items = [[self.item_ids[i] for i in items[r, :counts[r]]] for r in range(len(queries))]
        raw_scores = [scores[r, :counts[r]].astype(float).tolist() for r in range(len(queries))]
        titles = None
        if self.titles is not None:
            titles = [[self.titles[i] for i in items[r, :counts[r]]] for r in range(len(queries))]
        return Recommendations(queries, raw_items, raw_scores, titles, fallback)

    def set_search_params(self, *, nprobe: int | None = None, ef_search: int | None = None) -> None:
        """Change the index's search knobs (thread-safe)."""
        if self.index is None:
            raise ValueError("this Recommender scores the full catalogue; there is no index to tune.")
        with self._lock:
            self.index.set_search_params(nprobe=nprobe, ef_search=ef_search)


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_LOCK = _NoLock()


def _restore_model(class_path: str, ckpt: dict[str, Any], path: Path) -> torch.nn.Module:
    module_name, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError):
        raise CheckpointError(f"checkpoint {path} was written by model class {class_path}, which cannot be "
                              "imported here; install the package that defines it.") from None
    upgrade = getattr(cls, "upgrade_checkpoint", None)
    if callable(upgrade):  # a model whose constructor changed maps what an older version wrote
        ckpt = upgrade(ckpt)
    # LightningCLI adds bookkeeping keys such as `_class_path` next to the init arguments
    hparams = {k: v for k, v in (ckpt.get("hyper_parameters") or {}).items() if not k.startswith("_")}
    try:
        model = cls(**hparams)
        model.load_state_dict(ckpt["state_dict"])
    except (TypeError, RuntimeError, KeyError) as exc:
        raise CheckpointError(f"checkpoint {path} does not fit {class_path} ({type(exc).__name__}: "
                              f"{str(exc)[:200]}); it was written by a different version of the model."
                              ) from None
    return model.eval()


def _index_for(model: Any, path: Path, factory: str, rebuild: bool, nprobe: int | None,
               ef_search: int | None) -> Any:
    from recframe.retrieval import ItemIndex

    index_file = path.with_suffix(".faiss")
    if index_file.exists() and not rebuild:
        try:
            loaded = ItemIndex.load(path)
            if loaded.factory == factory:
                loaded.check_model(model)
                if nprobe is not None or ef_search is not None:
                    loaded.set_search_params(nprobe=nprobe, ef_search=ef_search)
                return loaded
        except (ValueError, CheckpointError) as exc:
            logger.info("rebuilding the index next to %s: %s", path.name, exc)
    index = ItemIndex.from_model(model, factory=factory, nprobe=nprobe, ef_search=ef_search)
    try:
        index.save(path)
    except OSError as exc:  # a read-only checkpoint directory: serve from memory
        logger.info("could not save the index next to %s (%s); it is kept in memory", path.name, exc)
    return index
