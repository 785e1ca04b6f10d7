"""CoCHI -- class-oriented causal head intervention for calibration (seed paragraph 2).

The estimator, fitted on validation data only:

1. **Patterns.** Classify every validation prediction as correct/wrong x confident/unconfident
   (:mod:`calib_ext.cochi.patterns`; threshold: the median validation confidence by default).
2. **Attribution.** Knock out each attention head in turn through the head probe and measure its effect on the
   confidence of each pattern's predictions (:mod:`calib_ext.cochi.attribution`).
3. **Selection.** A head is a candidate when it raises the confidence of the overconfident errors more than
   that of the correct-confident predictions::

       contrast(h) = log_effect_WC(h) - log_effect_CC(h)
       candidate  iff  log_effect_WC(h) > 0  and  contrast(h) > 0

   Candidates are ranked by ``contrast`` (the class-oriented part: a head that inflates every prediction alike
   has contrast ~0 and is left to output-level methods such as temperature scaling).
4. **Intervention.** The top-``k`` candidates' outputs are multiplied by learned scales, ``z_h -> s_h *
   z_h`` before the output projection (``recframe.heads.scale_heads``). The scales minimise the validation
   NLL. ``scales="shared"`` (default) learns one scale ``s`` for all selected heads by bounded Brent search
   (``scipy.optimize.minimize_scalar``, ``method="bounded"``) on ``scale_bounds`` (default ``[0, 2]``: from
   knocking the heads out to doubling them); ``scales="per_head"`` then refines one scale per head by
   coordinate-wise Brent searches (``sweeps`` passes over the heads). Both are derivative-free, so they work
   the same on every model the probe reaches (including cached generative scoring, which runs without
   gradients). One shared scale is the default because it is a single number fitted on validation data
   (little room to overfit), like temperature scaling. ``k`` is chosen among ``sizes`` (default ``1, 2, 4,
   ...`` up to ``max_heads``) by the same validation NLL; if no size lowers the NLL of the unchanged model,
   nothing is selected (``selected_heads_ == []``) and the model is left as it is.

Fitted attributes: ``threshold_``, ``pattern_counts_``, ``heads_`` (every head examined), ``effects_`` and
``log_effects_`` (``{pattern: [n_heads]}``), ``contrast_`` (``[n_heads]``), ``ranking_`` (the candidates,
best first), ``candidates_`` (``{k: (scales, validation NLL)}``), ``selected_heads_``, ``scales_``
(``{(site, head): scale}``), ``nll_before_`` and ``nll_after_`` (validation NLL without and with the
intervention).

Example::

    from calib_ext.cochi import CoCHI, RecTask
    cochi = CoCHI().fit(model, RecTask(dm.eval_view("valid")))
    with cochi.intervene(model):
        test_scores = model.score(batch)          # calibrated next-item scores
    cochi.apply_to(model)                         # or bake the scales into the output projections
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import numpy as np
import torch
from scipy.optimize import minimize_scalar
from torch import Tensor, nn
from tqdm.auto import tqdm

from calib_ext.cochi.attribution import Head, all_heads, head_effects, head_gradient_effects
from calib_ext.cochi.patterns import CODE, Pattern, classify, confidence_threshold, counts, predictions
from calib_ext.cochi.tasks import LogitTask, collect
from calib_ext.metrics import masked_logits, nll
from recframe.heads import head_projections, scale_heads

__all__ = ["CoCHI", "masked_nll"]

log = logging.getLogger(__name__)


def masked_nll(logits: Tensor, labels: Tensor) -> float:
    """:func:`calib_ext.metrics.nll` of logits whose masked classes are ``-inf``.

    Masked entries become ``-1e30`` (``exp`` of it underflows to exactly 0 in float64, so the softmax is the
    masked one) before the shared definition is applied.
    """
    z, finite = masked_logits(logits)
    return nll(torch.where(finite, z, torch.full_like(z, -1e30)), labels)


class CoCHI:
    """Class-oriented causal head intervention (module docstring).

    Args:
        threshold: confidence threshold rule, ``"median"`` (default), ``"accuracy"`` or a number in ``[0, 1]``
            (:func:`calib_ext.cochi.patterns.confidence_threshold`).
        heads: the ``(site, head)`` pairs to examine (default: every head the probe reaches).
        max_heads: most heads the intervention may scale.
        sizes: candidate numbers of heads (default ``1, 2, 4, ...`` up to ``max_heads``).
        scales: ``"shared"`` (one scale) or ``"per_head"``.
        scale_bounds: the interval the scales are searched in.
        xatol: absolute tolerance of each Brent search.
        sweeps: coordinate passes for ``scales="per_head"``.
        attribution: ``"ablation"`` (exact, one pass per head; default) or ``"gradient"`` (first-order, one
            forward/backward for all heads; :mod:`calib_ext.cochi.attribution`).
        progress: show progress bars.
    """

    def __init__(self, threshold: float | str = "median", heads: Sequence[Head] | None = None,
                 max_heads: int = 8, sizes: Sequence[int] | None = None,
                 scales: Literal["shared", "per_head"] = "shared",
                 scale_bounds: tuple[float, float] = (0.0, 2.0),
                 xatol: float = 1e-3, sweeps: int = 2,
                 attribution: Literal["ablation", "gradient"] = "ablation", progress: bool = True) -> None:
        if attribution not in ("ablation", "gradient"):
            raise ValueError(f"CoCHI: attribution must be 'ablation' or 'gradient', got {attribution!r}")
        self.attribution = attribution
        if scales not in ("shared", "per_head"):
            raise ValueError(f"CoCHI: scales must be 'shared' or 'per_head', got {scales!r}")
        lo, hi = (float(b) for b in scale_bounds)
        if not (math.isfinite(lo) and math.isfinite(hi) and 0.0 <= lo < 1.0 < hi):
            raise ValueError(f"CoCHI: scale_bounds must be finite with 0 <= low < 1 < high (1 leaves a head "
                             f"as it is), got {scale_bounds!r}")
        if int(max_heads) < 1:
            raise ValueError(f"CoCHI: max_heads must be >= 1, got {max_heads}")
        if sizes is not None and (not sizes or any(int(k) < 1 for k in sizes)):
            raise ValueError(f"CoCHI: sizes must be positive head counts, got {sizes!r}")
        confidence_threshold(torch.zeros(1), torch.zeros(1), threshold)  # validates the rule
        self.threshold, self.heads, self.max_heads, self.sizes = threshold, heads, int(max_heads), sizes
        self.scales, self.scale_bounds, self.xatol = scales, (lo, hi), float(xatol)
        self.sweeps, self.progress = int(sweeps), bool(progress)

    # ------------------------------------------------------------------------------------------ fitting
    def fit(self, model: nn.Module, val_data: LogitTask) -> CoCHI:
        """Attribute, select and learn the scales on validation data (module docstring)."""
        logits, labels = collect(model, val_data)
        yhat, conf = predictions(logits)
        self.threshold_ = confidence_threshold(conf, yhat == labels, self.threshold)
        codes = classify(logits, labels, self.threshold_)
        self.pattern_counts_ = counts(codes)
        self.heads_ = [(str(s), int(h)) for s, h in (self.heads or all_heads(model))]
        if self.attribution == "gradient":
            eff = head_gradient_effects(model, val_data, self.heads_, yhat, codes, self.progress)
        else:
            eff = head_effects(model, val_data, self.heads_, yhat, codes, self.progress, clean_logits=logits)
        self.effects_, self.log_effects_ = eff["effect"], eff["log_effect"]
        wc = np.nan_to_num(self.log_effects_[Pattern.WRONG_CONFIDENT.value], nan=0.0)
        cc = np.nan_to_num(self.log_effects_[Pattern.CORRECT_CONFIDENT.value], nan=0.0)
        self.contrast_ = wc - cc
        order = [j for j in np.argsort(-self.contrast_, kind="stable") if wc[j] > 0 and self.contrast_[j] > 0]
        self.ranking_ = [self.heads_[j] for j in order]
        self.nll_before_ = masked_nll(logits, labels)
        self.candidates_: dict[int, tuple[dict[Head, float], float]] = {}
        if codes.eq(CODE[Pattern.WRONG_CONFIDENT]).sum() == 0:
            log.warning("CoCHI: no wrong-confident prediction on the validation data; nothing to act on")
        for k in tqdm(self._sizes(len(self.ranking_)), desc="CoCHI scales", disable=not self.progress,
                      leave=False):
            self.candidates_[k] = self._fit_scales(model, val_data, self.ranking_[:k])
        best = min(self.candidates_, key=lambda k: self.candidates_[k][1], default=None)
        if best is not None and self.candidates_[best][1] < self.nll_before_:
            self.scales_, self.nll_after_ = self.candidates_[best]
        else:
            self.scales_, self.nll_after_ = {}, self.nll_before_
        self.selected_heads_ = list(self.scales_)
        return self

    def _sizes(self, n_candidates: int) -> list[int]:
        cap = min(self.max_heads, n_candidates)
        if self.sizes is not None:
            return sorted({int(k) for k in self.sizes if int(k) <= cap})
        ks = [2 ** i for i in range(int(math.log2(cap)) + 1)] if cap >= 1 else []
        return sorted(set(ks) | ({cap} if cap else set()))

    def _nll_at(self, model: nn.Module, data: LogitTask, scales: dict[Head, float]) -> float:
        with scale_heads(model, scales):
            logits, labels = collect(model, data)
        return masked_nll(logits, labels)

    def _search(self, f: Any) -> tuple[float, float]:
        res = minimize_scalar(f, bounds=self.scale_bounds, method="bounded", options={"xatol": self.xatol})
        return float(res.x), float(res.fun)

    def _fit_scales(self, model: nn.Module, data: LogitTask, heads: list[Head]
                    ) -> tuple[dict[Head, float], float]:
        """Scales of ``heads`` minimising the validation NLL, and that NLL."""
        s, value = self._search(lambda v: self._nll_at(model, data, {h: float(v) for h in heads}))
        scales = {h: s for h in heads}
        if self.scales == "per_head" and len(heads) > 1:
            for _ in range(self.sweeps):
                for h in heads:
                    v, f = self._search(lambda x, h=h: self._nll_at(model, data, {**scales, h: float(x)}))
                    if f < value:
                        scales[h], value = v, f
        return scales, value

    # --------------------------------------------------------------------------------------- using it
    def _check_fitted(self) -> None:
        if not hasattr(self, "scales_"):
            raise RuntimeError("CoCHI is not fitted; call CoCHI(...).fit(model, val_data) first")

    @contextmanager
    def intervene(self, model: nn.Module) -> Iterator[nn.Module]:
        """Run ``model`` with the learned scales while the ``with`` block runs (through the head probe)."""
        self._check_fitted()
        with scale_heads(model, self.scales_):
            yield model

    def collect(self, model: nn.Module, data: LogitTask) -> tuple[Tensor, Tensor]:
        """``(logits, labels)`` of ``data`` with the intervention applied."""
        with self.intervene(model):
            return collect(model, data)

    def apply_to(self, model: nn.Module) -> nn.Module:
        """Bake the scales into the model's weights, in place, and return it.

        Scaling head ``h``'s output ``z_h`` by ``s`` before the output projection ``sum_h W_O^h z_h + b`` is
        the same as scaling the projection's columns ``W_O^h`` by ``s``, so the changed model computes exactly
        what :meth:`intervene` computes, without hooks (and can be saved as a checkpoint).
        """
        self._check_fitted()
        with torch.no_grad():
            for (site, h), s in self.scales_.items():
                head_projections(model, site).output[h].mul_(s)
        return model

    def report(self) -> dict[str, Any]:
        """The fitted state as plain JSON data."""
        self._check_fitted()
        name = [f"{s}#{h}" for s, h in self.heads_]
        return {
            "threshold": self.threshold_, "pattern_counts": self.pattern_counts_,
            "heads": name,
            "effects": {p: _plain(v) for p, v in self.effects_.items()},
            "log_effects": {p: _plain(v) for p, v in self.log_effects_.items()},
            "contrast": _plain(self.contrast_),
            "ranking": [f"{s}#{h}" for s, h in self.ranking_],
            "candidates": {str(k): {"scales": {f"{s}#{h}": v for (s, h), v in sc.items()}, "nll": f}
                           for k, (sc, f) in self.candidates_.items()},
            "selected_heads": [f"{s}#{h}" for s, h in self.selected_heads_],
            "scales": {f"{s}#{h}": v for (s, h), v in self.scales_.items()},
            "nll_before": self.nll_before_, "nll_after": self.nll_after_,
        }


def _plain(values: np.ndarray) -> list[float | None]:
    """Floats for JSON, ``None`` for NaN (a pattern without examples)."""
    return [None if not math.isfinite(float(v)) else float(v) for v in values]
