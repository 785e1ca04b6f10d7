"""Calibration metrics for multi-class predictions: ECE (equal-width and equal-mass), classwise ECE, NLL,
Brier score, accuracy, and reliability diagrams.

Inputs are ``probs`` ``[n, C]`` (non-negative rows summing to 1) or ``logits`` ``[n, C]`` and integer
``labels`` ``[n]`` in ``0..C-1``, as numpy arrays or torch tensors (any device; computed in float64).

Conventions (where the reference libraries differ, this is the one we follow and why):

* **Bins are half-open ``(lo, hi]``** with edges ``0, 1/M, ..., 1``, as in the definition of Guo et al.
  (2017), ``I_m = ((m-1)/M, m/M]``; a confidence of exactly 0 goes into the first bin. torchmetrics bins
  ``[lo, hi)`` (and puts a confidence of exactly 1 into an extra bin); netcal bins with
  ``numpy.histogram`` (``[lo, hi)``, last bin closed). The three agree whenever no confidence sits exactly on
  an inner edge, which is what the tests check on continuous random inputs; a hand-computed test pins our
  edge rule.
* **Equal-mass bins** (the "adaptive" ECE of Nixon et al., 2019): the edges are the ``b/M`` quantiles of the
  confidences (``numpy.quantile``, linear interpolation; outer edges 0 and 1), bins again ``(lo, hi]``, so
  each bin holds ``n/M`` samples up to rounding and equal confidences always share a bin (with many ties a
  bin can be empty). This is netcal's ``ECE(equal_intervals=False)`` construction, which differs only in
  putting a confidence that equals an inner edge into the upper bin.
* **Classwise ECE** is Kull et al. (2019): each class's probability column is binned on its own, and the
  per-class ECEs are averaged over **all** ``C`` classes (classes that never occur count too), equal-width
  ``(lo, hi]`` bins. This equals the mean over classes of torchmetrics' ``binary_calibration_error`` of
  ``(probs[:, j], labels == j)`` up to the edge rule.
* **Brier** is the original multi-class Brier (1950) score: the sum over classes, mean over samples (range
  ``[0, 2]``), not the one-vs-rest mean over classes.
* ``argmax`` ties resolve to the lowest class index (``torch.argmax``).

The streaming pieces (:func:`binned_stats`, :func:`ece_from_stats`) are what the evaluator's calibration
family (:mod:`calib_ext.family`) accumulates chunk by chunk, so the offline and the streamed ECE are one
definition.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from recframe.checkpoint_io import atomic_write

BINNINGS: tuple[str, ...] = ("width", "mass")

__all__ = [
    "BINNINGS",
    "accuracy",
    "binned_stats",
    "brier",
    "calibration_summary",
    "classwise_ece",
    "classwise_stats",
    "ece_from_confidence",
    "ece_from_stats",
    "mass_bin_edges",
    "masked_logits",
    "nll",
    "reliability_diagram",
    "top_label_ece",
    "width_bin_index",
]


# ---------------------------------------------------------------------------------------------- inputs
def _as_float(x: Any, name: str) -> Tensor:
    if isinstance(x, Tensor):
        t = x.detach()
    else:
        try:
            t = torch.as_tensor(np.asarray(x))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"`{name}` must be a numpy array or torch tensor of shape [n, C], got "
                            f"{type(x).__name__}") from exc
    if t.dim() != 2:
        raise ValueError(f"`{name}` must be 2-D [n, C] (one row per sample), got shape {tuple(t.shape)}")
    if t.shape[0] == 0 or t.shape[1] == 0:
        raise ValueError(f"`{name}` is empty (shape {tuple(t.shape)}); pass at least one sample and class")
    t = t.to(torch.float64)
    if not torch.isfinite(t).all():
        raise ValueError(f"`{name}` contains NaN or infinite values; mask invalid classes before calling")
    return t


def _as_labels(labels: Any, n: int, n_classes: int, device: torch.device) -> Tensor:
    t = labels.detach() if isinstance(labels, Tensor) else torch.as_tensor(np.asarray(labels))
    if t.dim() != 1 or t.shape[0] != n:
        raise ValueError(f"`labels` must be 1-D with one entry per row ({n}), got shape {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"`labels` must hold integer class indices, got dtype {t.dtype}")
    t = t.to(device=device, dtype=torch.long)
    if n and (int(t.min()) < 0 or int(t.max()) >= n_classes):
        raise ValueError(f"`labels` must lie in 0..{n_classes - 1} (columns of probs/logits), got range "
                         f"{int(t.min())}..{int(t.max())}")
    return t


def _probs_labels(probs: Any, labels: Any, atol: float = 1e-4) -> tuple[Tensor, Tensor]:
    p = _as_float(probs, "probs")
    if bool((p < 0).any()):
        raise ValueError("`probs` has negative entries; pass probabilities (softmax of the logits), or use "
                         "calibration_summary(logits, labels)")
    sums = p.sum(dim=1)
    worst = float((sums - 1).abs().max())
    if worst > atol:
        raise ValueError(f"`probs` rows must sum to 1 (largest deviation {worst:.3g}); pass softmax "
                         "probabilities, or logits to nll()/calibration_summary()")
    return p, _as_labels(labels, p.shape[0], p.shape[1], p.device)


def masked_logits(logits: Any) -> tuple[Tensor, Tensor]:
    """float64 logits with ``-inf`` entries replaced by 0, and the bool mask of finite entries.

    Raises on NaN, ``+inf`` or an all-masked row.
    """
    z = logits.detach() if isinstance(logits, Tensor) else torch.as_tensor(np.asarray(logits))
    if z.dim() != 2 or z.shape[0] == 0:
        raise ValueError(f"`logits` must be a non-empty 2-D array [n, C], got shape {tuple(z.shape)}")
    z = z.to(torch.float64)
    if bool(torch.isnan(z).any()) or bool((z == float("inf")).any()):
        raise ValueError("`logits` contains NaN or +inf; only -inf (a masked class) is allowed")
    finite = torch.isfinite(z)
    if not bool(finite.any(dim=1).all()):
        raise ValueError("a row of `logits` is entirely -inf; every sample needs one unmasked class")
    return torch.where(finite, z, 0.0), finite


def _check_bins(n_bins: int) -> int:
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"`n_bins` must be a positive integer, got {n_bins!r}")
    return int(n_bins)


# ---------------------------------------------------------------------------------------------- binning
def width_bin_index(conf: Tensor, n_bins: int) -> Tensor:
    """Equal-width bin of each confidence: ``b`` such that ``b/M < conf <= (b+1)/M`` (0 for ``conf = 0``)."""
    inner = torch.linspace(0.0, 1.0, n_bins + 1, dtype=conf.dtype, device=conf.device)[1:-1]
    return torch.bucketize(conf.contiguous(), inner, right=False)


def mass_bin_edges(conf: Tensor, n_bins: int) -> Tensor:
    """Equal-mass bin edges: the ``b/M`` quantiles of the confidences (linear interpolation, as
    ``numpy.quantile``), with the outer edges set to 0 and 1."""
    q = torch.linspace(0.0, 1.0, n_bins + 1, dtype=torch.float64, device=conf.device)
    edges = torch.quantile(conf.to(torch.float64), q, interpolation="linear")
    edges[0], edges[-1] = 0.0, 1.0
    return edges


def _mass_bin_index(conf: Tensor, n_bins: int) -> Tensor:
    inner = mass_bin_edges(conf, n_bins)[1:-1].contiguous()
    return torch.bucketize(conf.contiguous(), inner, right=False)


def binned_stats(conf: Tensor, correct: Tensor, n_bins: int, bin_index: Tensor | None = None) -> Tensor:
    """Per-bin running sums ``[3, M]`` (float64): sample count, summed confidence, summed correctness.

    They add across chunks and processes, so ECE can be streamed (:func:`ece_from_stats`). Equal-width
    ``(lo, hi]`` bins unless ``bin_index`` is given.
    """
    conf = conf.to(torch.float64).reshape(-1)
    correct = correct.to(torch.float64).reshape(-1)
    idx = width_bin_index(conf, n_bins) if bin_index is None else bin_index.reshape(-1)
    stats = torch.zeros(3, n_bins, dtype=torch.float64, device=conf.device)
    stats[0].scatter_add_(0, idx, torch.ones_like(conf))
    stats[1].scatter_add_(0, idx, conf)
    stats[2].scatter_add_(0, idx, correct)
    return stats


def ece_from_stats(stats: Tensor) -> float:
    """``ECE = sum_b |B_b|/n * |acc(B_b) - conf(B_b)| = (1/n) sum_b |sum_{i in B_b} (y_i - c_i)|``.

    ``stats`` ``[..., 3, M]`` from :func:`binned_stats`; leading dimensions (e.g. classes) are averaged.
    """
    count, conf_sum, acc_sum = stats[..., 0, :], stats[..., 1, :], stats[..., 2, :]
    n = count.sum(dim=-1)
    if bool((n <= 0).any()):
        return float("nan")
    per = (acc_sum - conf_sum).abs().sum(dim=-1) / n
    return float(per.mean())


# ---------------------------------------------------------------------------------------------- metrics
def top_label_ece(probs: Any, labels: Any, n_bins: int = 15, binning: str = "width") -> float:
    """Top-label expected calibration error (Guo et al., 2017).

    With confidence ``c_i = max_k p_ik``, prediction ``yhat_i = argmax_k p_ik`` and correctness
    ``a_i = 1[yhat_i = y_i]``, and bins ``B_1..B_M`` of the confidences::

        ECE = sum_b |B_b| / n * | (1/|B_b|) sum_{i in B_b} a_i  -  (1/|B_b|) sum_{i in B_b} c_i |

    Empty bins contribute 0. ``binning="width"``: ``B_b = {i : (b-1)/M < c_i <= b/M}``; ``binning="mass"``:
    ``B_b = {i : q_{b-1} < c_i <= q_b}`` with ``q_b`` the ``b/M`` quantile of the confidences
    (:func:`mass_bin_edges`).
    """
    n_bins = _check_bins(n_bins)
    if binning not in BINNINGS:
        raise ValueError(f"`binning` must be one of {list(BINNINGS)}, got {binning!r}")
    p, y = _probs_labels(probs, labels)
    conf, pred = p.max(dim=1)
    return ece_from_confidence(conf, pred == y, n_bins, binning)


def ece_from_confidence(conf: Any, correct: Any, n_bins: int = 15, binning: str = "width") -> float:
    """Top-label ECE from per-sample confidences ``c_i`` and correctness ``a_i`` (same formula and bins as
    :func:`top_label_ece`); for callers that keep only these two numbers per sample."""
    n_bins = _check_bins(n_bins)
    if binning not in BINNINGS:
        raise ValueError(f"`binning` must be one of {list(BINNINGS)}, got {binning!r}")
    conf = torch.as_tensor(conf, dtype=torch.float64).reshape(-1)
    correct = torch.as_tensor(correct).reshape(-1).to(device=conf.device)
    if conf.numel() == 0 or conf.shape != correct.shape:
        raise ValueError(f"`conf` and `correct` must be non-empty and of one length, got {tuple(conf.shape)} "
                         f"and {tuple(correct.shape)}")
    idx = _mass_bin_index(conf, n_bins) if binning == "mass" else None
    return ece_from_stats(binned_stats(conf, correct, n_bins, idx))


def classwise_stats(p: Tensor, y: Tensor, n_bins: int) -> Tensor:
    """Per-class binned sums ``[C, 3, M]``: count, summed ``p_ij`` and summed ``1[y_i = j]`` per bin."""
    n, c = p.shape
    idx = width_bin_index(p, n_bins) + torch.arange(c, device=p.device)[None, :] * n_bins  # [n, C]
    onehot = torch.zeros_like(p)
    onehot[torch.arange(n, device=p.device), y] = 1.0
    stats = torch.zeros(3, c * n_bins, dtype=torch.float64, device=p.device)
    flat = idx.reshape(-1)
    stats[0].scatter_add_(0, flat, torch.ones_like(flat, dtype=torch.float64))
    stats[1].scatter_add_(0, flat, p.reshape(-1))
    stats[2].scatter_add_(0, flat, onehot.reshape(-1))
    return stats.reshape(3, c, n_bins).permute(1, 0, 2).contiguous()


def classwise_ece(probs: Any, labels: Any, n_bins: int = 15) -> float:
    """Classwise ECE (Kull et al., 2019), equal-width ``(lo, hi]`` bins per class::

        cwECE = (1/C) sum_j sum_b |B_jb| / n * | (1/|B_jb|) sum_{i in B_jb} 1[y_i = j] - (1/|B_jb|) sum p_ij |

    where ``B_jb = {i : (b-1)/M < p_ij <= b/M}``; the mean runs over all ``C`` classes.
    """
    n_bins = _check_bins(n_bins)
    p, y = _probs_labels(probs, labels)
    return ece_from_stats(classwise_stats(p, y, n_bins))


def nll(logits: Any, labels: Any) -> float:
    """Mean negative log-likelihood ``-(1/n) sum_i log softmax(z_i)[y_i]`` (natural log, via log_softmax)."""
    z = _as_float(logits, "logits")
    y = _as_labels(labels, z.shape[0], z.shape[1], z.device)
    return float(-torch.log_softmax(z, dim=1).gather(1, y[:, None]).mean())


def brier(probs: Any, labels: Any) -> float:
    """Multi-class Brier score ``(1/n) sum_i sum_k (p_ik - 1[y_i = k])^2`` (range ``[0, 2]``)."""
    p, y = _probs_labels(probs, labels)
    sq = (p * p).sum(dim=1) - 2 * p.gather(1, y[:, None]).squeeze(1) + 1.0
    return float(sq.mean())


def accuracy(probs: Any, labels: Any) -> float:
    """Top-1 accuracy ``(1/n) sum_i 1[argmax_k p_ik = y_i]`` (ties: lowest index)."""
    p, y = _probs_labels(probs, labels)
    return float((p.argmax(dim=1) == y).to(torch.float64).mean())


def calibration_summary(logits: Any, labels: Any, n_bins: int = 15) -> dict[str, float]:
    """All metrics of one set of logits: ``ece`` (width), ``ece_mass``, ``classwise_ece``, ``nll``,
    ``brier`` and ``accuracy``, with ``probs = softmax(logits)``.

    Masked classes may be passed as ``-inf`` logits (they get probability 0); every row needs one finite
    logit.
    """
    z, finite = masked_logits(logits)
    z = z.masked_fill(~finite, float("-inf"))
    y = _as_labels(labels, z.shape[0], z.shape[1], z.device)
    log_p = torch.log_softmax(z, dim=1)
    probs = log_p.exp()
    return {
        "ece": top_label_ece(probs, y, n_bins, "width"),
        "ece_mass": top_label_ece(probs, y, n_bins, "mass"),
        "classwise_ece": classwise_ece(probs, y, n_bins),
        "nll": float(-log_p.gather(1, y[:, None]).mean()),
        "brier": brier(probs, y),
        "accuracy": accuracy(probs, y),
    }


# ---------------------------------------------------------------------------------------------- plots
def reliability_diagram(probs: Any, labels: Any, path: str | Path, n_bins: int = 15,
                        title: str | None = None, binning: str = "width") -> Path:
    """Save a reliability diagram (PNG, atomic write) and return its path.

    Top panel: one bar per bin spanning the bin's edges, its height the bin's accuracy; a red marker at
    (mean confidence, mean confidence) on the diagonal, joined to the bar top, shows the gap; the legend
    gives the bins' ECE. Bottom panel: the share of samples per bin. ``binning="mass"`` uses equal-mass
    bins and zooms the axes to the confidences present, which is the readable choice when all confidences
    are small (next-item probabilities over a large catalogue fall into the first equal-width bin).
    """
    import io

    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    n_bins = _check_bins(n_bins)
    if binning not in BINNINGS:
        raise ValueError(f"`binning` must be one of {list(BINNINGS)}, got {binning!r}")
    p, y = _probs_labels(probs, labels)
    conf, pred = p.max(dim=1)
    if binning == "mass":
        edges_t = mass_bin_edges(conf, n_bins)
        idx = _mass_bin_index(conf, n_bins)
    else:
        edges_t = torch.linspace(0.0, 1.0, n_bins + 1, dtype=torch.float64)
        idx = None
    stats_t = binned_stats(conf, pred == y, n_bins, idx)
    ece = ece_from_stats(stats_t)
    count, conf_sum, acc_sum = stats_t.cpu().numpy()
    edges = edges_t.cpu().numpy()
    nonempty = count > 0
    acc = np.divide(acc_sum, count, out=np.zeros(n_bins), where=nonempty)
    mean_conf = np.divide(conf_sum, count, out=np.zeros(n_bins), where=nonempty)
    lo, widths = edges[:-1], np.diff(edges)
    if binning == "mass":  # the outer edges are 0 and 1: draw the first/last bar over the data's range
        lo = lo.copy()
        lo[0] = float(conf.min())
        widths = np.diff(np.append(lo, float(conf.max())))
    top = 1.0 if binning == "width" else min(1.0, 1.05 * max(float(conf.max()), float(acc.max())))

    fig, (ax, axh) = plt.subplots(2, 1, figsize=(4.8, 5.8), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 1]})
    ax.plot([0, top], [0, top], "k--", lw=1, label="perfect calibration")
    ax.bar(lo[nonempty], acc[nonempty], width=widths[nonempty], align="edge", edgecolor="black",
           color="#4c72b0", alpha=0.8, label=f"accuracy per bin (ECE = {ece:.4f})")
    for c, a in zip(mean_conf[nonempty], acc[nonempty]):
        ax.plot([c, c], [c, a], color="#c44e52", lw=1.5)
    ax.plot(mean_conf[nonempty], mean_conf[nonempty], "o", color="#c44e52", ms=4,
            label="mean confidence (gap in red)")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_ylabel("accuracy")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title((title + "\n" if title else "") + f"{n_bins} equal-{binning} bins", fontsize=9)
    axh.bar(lo, count / max(count.sum(), 1), width=widths, align="edge", color="grey", edgecolor="black")
    axh.set_xlabel("confidence (top-label probability)")
    axh.set_ylabel("share of samples")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    path = Path(path)
    atomic_write(path, lambda fh: fh.write(buf.getvalue()))
    return path
