"""Temperature scaling (Guo et al., 2017): the standard post-hoc calibration baseline.

One scalar ``T > 0`` divides every logit, ``p = softmax(z / T)``; it leaves the argmax (so accuracy) unchanged
and is fitted on held-out (validation) data by minimising the negative log-likelihood::

    T* = argmin_T  -(1/n) sum_i log softmax(z_i / T)[y_i]

We optimise over ``tau = log T`` (unconstrained, keeps ``T > 0``) with L-BFGS and a strong-Wolfe line search,
starting at ``T = 1``, in float64. The NLL is convex in ``1/T``, so the minimum is unique whenever it is
finite. On separable data (every sample's label is its strict argmax) the NLL decreases all the way to
``T -> 0`` and has no minimiser: L-BFGS then stops where the gradient vanishes numerically, ``converged_`` is
False and a warning says so. ``log T`` is clamped to ``[log 1e-3, log 1e3]``; hitting a bound also sets
``converged_`` False.

Masked classes may be given as ``-inf`` logits; they keep probability 0 at every ``T``.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch
from torch import Tensor

from calib_ext.metrics import _as_labels, masked_logits

__all__ = ["TemperatureScaler", "masked_logits"]

LOG_T_BOUNDS: tuple[float, float] = (math.log(1e-3), math.log(1e3))


def _scaled_log_softmax(z: Tensor, finite: Tensor, log_t: Tensor) -> Tensor:
    return torch.log_softmax((z / log_t.exp()).masked_fill(~finite, float("-inf")), dim=1)


class TemperatureScaler:
    """Post-hoc temperature scaling fitted by L-BFGS on the NLL of ``log T`` (see the module docstring).

    Args:
        max_iter: L-BFGS iterations (each with a strong-Wolfe line search).
        tol: gradient tolerance of L-BFGS.

    Fitted attributes: ``temperature_`` (float), ``nll_before_`` / ``nll_after_`` (NLL at ``T = 1`` and at
    ``T*`` on the fitting data), ``converged_`` (False when ``T*`` hit a bound), ``n_samples_``.
    """

    def __init__(self, max_iter: int = 100, tol: float = 1e-10) -> None:
        if int(max_iter) < 1:
            raise ValueError(f"`max_iter` must be >= 1, got {max_iter}")
        self.max_iter = int(max_iter)
        self.tol = float(tol)

    def fit(self, logits: Any, labels: Any) -> TemperatureScaler:
        """Learn ``temperature_`` from validation ``logits`` ``[n, C]`` and integer ``labels`` ``[n]``.

        Works inside ``torch.no_grad`` / ``torch.inference_mode`` too (e.g. a Lightning test hook): the fit
        leaves inference mode and enables gradients for its own computation only.
        """
        with torch.inference_mode(False), torch.enable_grad():
            # tensors made in inference mode cannot be saved for backward: work on normal copies
            logits = logits.clone() if isinstance(logits, Tensor) else logits
            labels = labels.clone() if isinstance(labels, Tensor) else labels
            return self._fit(logits, labels)

    def _fit(self, logits: Any, labels: Any) -> TemperatureScaler:
        z, finite = masked_logits(logits)
        y = _as_labels(labels, z.shape[0], z.shape[1], z.device)
        if not bool(finite.gather(1, y[:, None]).all()):
            raise ValueError("a label points at a masked (-inf) logit; its likelihood is 0 at every T")
        log_t = torch.zeros((), dtype=torch.float64, device=z.device, requires_grad=True)
        opt = torch.optim.LBFGS([log_t], lr=1.0, max_iter=self.max_iter, tolerance_grad=self.tol,
                                tolerance_change=1e-14, line_search_fn="strong_wolfe")

        def closure() -> Tensor:
            opt.zero_grad()
            loss = -_scaled_log_softmax(z, finite, log_t.clamp(*LOG_T_BOUNDS)).gather(1, y[:, None]).mean()
            loss.backward()
            return loss

        before = float(closure().detach())
        opt.step(closure)
        value = float(log_t.detach())
        if not math.isfinite(value):
            raise RuntimeError("temperature scaling diverged (non-finite log T); check the logits")
        lo, hi = LOG_T_BOUNDS
        top2 = z.masked_fill(~finite, float("-inf")).topk(min(2, z.shape[1]), dim=1).values
        label_logit = z.gather(1, y[:, None]).squeeze(1)
        strict_top = (label_logit == top2[:, 0]) & (top2[:, 0] > top2[:, -1])
        separable = z.shape[1] > 1 and bool(strict_top.all())
        self.converged_ = lo < value < hi and not separable
        if separable:
            warnings.warn("temperature scaling on separable data (every label is the strict argmax): the NLL "
                          "has no minimum, T -> 0; fit on held-out data the model gets wrong at times",
                          RuntimeWarning, stacklevel=2)
        self.temperature_ = math.exp(min(max(value, lo), hi))
        self.nll_before_ = before
        with torch.no_grad():
            t = torch.tensor(math.log(self.temperature_), dtype=torch.float64, device=z.device)
            self.nll_after_ = float(-_scaled_log_softmax(z, finite, t).gather(1, y[:, None]).mean())
        self.n_samples_ = int(z.shape[0])
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "temperature_"):
            raise RuntimeError("TemperatureScaler is not fitted; call fit(val_logits, val_labels) first")

    def transform(self, logits: Any) -> Tensor:
        """``logits / T*`` as a float64 tensor (``-inf`` entries stay ``-inf``)."""
        self._check_fitted()
        z, finite = masked_logits(logits)
        return (z / self.temperature_).masked_fill(~finite, float("-inf"))

    def predict_proba(self, logits: Any) -> Tensor:
        """``softmax(logits / T*)`` ``[n, C]`` float64."""
        return torch.softmax(self.transform(logits), dim=1)

    def fit_transform(self, logits: Any, labels: Any) -> Tensor:
        """:meth:`fit` then :meth:`transform` on the same logits."""
        return self.fit(logits, labels).transform(logits)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable settings and fitted values."""
        self._check_fitted()
        return {"temperature": self.temperature_, "nll_before": self.nll_before_,
                "nll_after": self.nll_after_, "converged": self.converged_,
                "n_samples": self.n_samples_, "max_iter": self.max_iter}

    def __repr__(self) -> str:
        fitted = f", temperature_={self.temperature_:.4f}" if hasattr(self, "temperature_") else ""
        return f"TemperatureScaler(max_iter={self.max_iter}{fitted})"
