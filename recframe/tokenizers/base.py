"""The one tokenizer interface: ``tokenizer.fit(features) -> SIDTable``.

A tokenizer's constructor only stores settings (validated); ``fit`` takes the item feature
matrix ``[n_items + 1, d]`` (row 0 = padding, see :func:`recframe.features.as_feature_matrix`),
computes one code path per real item, resolves collisions with an extra level
(:mod:`recframe.tokenizers.collisions`), measures the result (:mod:`recframe.tokenizers.stats`)
and returns a :class:`SIDTable` fingerprinted by the features and :meth:`SIDTokenizer.get_settings`.
Fitted state lives in attributes ending in ``_`` (``table_``, and per tokenizer e.g.
``codebooks_``); :meth:`SIDTokenizer.encode` maps new item vectors to their (pre-disambiguation)
code paths, e.g. for cold-start items.

A tokenizer that learns from a second, collaborative matrix (a trained recommender's item table, see
:func:`recframe.features.collaborative_item_embeddings`) sets ``accepts_collaborative = True`` and
takes it as ``_fit_codes(items, collaborative=...)``; ``fit(features, collaborative=None)`` passes it
only when given (so other tokenizers keep the one-argument ``_fit_codes``), and the SID table's
fingerprint then also covers the collaborative matrix. Encoding (cold-start items) needs only features.
"""

from __future__ import annotations

import hashlib
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from recframe.features.matrix import as_feature_matrix
from recframe.tokenizers.collisions import disambiguate
from recframe.tokenizers.sid_table import SIDTable, sid_fingerprint
from recframe.tokenizers.stats import sid_stats


class SIDTokenizer(ABC):
    """Base class: subclasses set ``name`` and implement ``_settings``, ``_fit_codes`` and ``_encode``."""

    name: ClassVar[str]
    #: whether ``fit`` takes a ``collaborative`` matrix (passed on to ``_fit_codes``)
    accepts_collaborative: ClassVar[bool] = False

    # ------------------------------------------------------------ interface
    @property
    @abstractmethod
    def codebook_sizes(self) -> tuple[int, ...]:
        """Codes per semantic level (before any disambiguation level)."""

    @abstractmethod
    def _settings(self) -> dict[str, Any]:
        """The settings that determine the codes (JSON-able), without the tokenizer name."""

    @abstractmethod
    def _fit_codes(self, items: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """Learn from the real item rows ``[n_items, d]``; return codes ``[n_items, L]`` + extra stats."""

    @abstractmethod
    def _encode(self, vectors: np.ndarray) -> np.ndarray:
        """Codes ``[m, L]`` of item vectors ``[m, d]`` with the fitted state."""

    # ---------------------------------------------------------------- API
    def get_settings(self) -> dict[str, Any]:
        """``{"tokenizer": name, **settings}``: what the SID table's fingerprint covers.

        After a fit with a collaborative matrix it also holds ``"collaborative"``: that matrix's sha256.
        """
        settings = {"tokenizer": self.name, **self._settings()}
        if getattr(self, "collaborative_fingerprint_", None) is not None:
            settings["collaborative"] = self.collaborative_fingerprint_
        return settings

    def fit(self, features: np.ndarray, collaborative: np.ndarray | None = None) -> SIDTable:
        """Fit on ``features [n_items + 1, d]`` (row 0 = padding) and return the :class:`SIDTable`.

        ``collaborative [n_items + 1, d_c]`` (row 0 = padding), for tokenizers with
        ``accepts_collaborative``: item vectors of a collaborative model the codes are regularised toward.
        """
        x = as_feature_matrix(features)
        self.collaborative_fingerprint_: str | None = None
        start = time.perf_counter()
        if collaborative is None:
            codes, extra = self._fit_codes(x[1:])
        else:
            if not self.accepts_collaborative:
                raise ValueError(f"{type(self).__name__} does not take a collaborative matrix; use "
                                 "RQVAETokenizer (LETTER-style regulariser) or fit on "
                                 "recframe.features.hybrid_item_features(text, collaborative).")
            c = as_feature_matrix(collaborative)
            if c.shape[0] != x.shape[0]:
                raise ValueError(f"collaborative has {c.shape[0] - 1} items but features {x.shape[0] - 1}; "
                                 "both must be [n_items + 1, d] for the same items.")
            self.collaborative_fingerprint_ = hashlib.sha256(c.tobytes() + str(c.shape).encode()).hexdigest()
            codes, extra = self._fit_codes(x[1:], collaborative=c[1:])
        seconds = time.perf_counter() - start
        self.n_features_in_ = int(x.shape[1])
        self.table_ = build_sid_table(codes, self.codebook_sizes, x, self.get_settings(),
                                      {**extra, "fit_seconds": seconds})
        return self.table_

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        """Semantic codes ``[m, L]`` (no disambiguation level) of item vectors ``[m, d]`` (no padding row)."""
        if not hasattr(self, "table_"):
            raise ValueError(f"{type(self).__name__} is not fitted; call fit(features) first.")
        v = np.asarray(vectors, dtype=np.float32)
        if v.ndim != 2 or v.shape[1] != self.n_features_in_:
            raise ValueError(f"vectors must be [m, {self.n_features_in_}] (the fitted feature width); got "
                             f"shape {v.shape}.")
        return self._encode(v)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._settings().items())
        return f"{type(self).__name__}({args})"


def build_sid_table(codes: np.ndarray, codebook_sizes: Sequence[int], features: np.ndarray,
                    settings: dict[str, Any], extra_stats: dict[str, Any] | None = None) -> SIDTable:
    """Disambiguate ``codes [n_items, L]``, measure, fingerprint, and wrap them in a :class:`SIDTable`."""
    codes = np.asarray(codes, dtype=np.int64)
    full, extra_size = disambiguate(codes)
    sizes = tuple(int(s) for s in codebook_sizes) + ((extra_size,) if extra_size else ())
    stats = {**sid_stats(codes, codebook_sizes, extra_size), **(extra_stats or {})}
    padded = np.concatenate([np.zeros((1, full.shape[1]), dtype=np.int64), full])
    return SIDTable(codes=padded, codebook_sizes=sizes, fingerprint=sid_fingerprint(features, settings),
                    settings=settings, stats=stats)


def level_sizes(n_levels: int, codebook_size: int | Sequence[int]) -> tuple[int, ...]:
    """Validated per-level codebook sizes from ``n_levels`` and an int or a per-level sequence."""
    check_positive_int("n_levels", n_levels)
    single = isinstance(codebook_size, int | np.integer)
    sizes = (codebook_size,) * n_levels if single else tuple(codebook_size)
    if len(sizes) != n_levels:
        raise ValueError(f"codebook_size has {len(sizes)} entries but n_levels={n_levels}; give one size per "
                         "level or a single int.")
    for s in sizes:
        check_positive_int("codebook_size", s, minimum=2)
    return tuple(int(s) for s in sizes)


def check_positive_int(name: str, value: Any, *, minimum: int = 1) -> int:
    """``value`` as an int ``>= minimum``, else a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}.")
    return int(value)
