"""Small textbook causal models with known answers (used in tests, docs and as generator sources).

* :func:`kidney_stones`: Charig et al. (1986) via Julious & Mullee (1994), the classic Simpson's
  paradox. Open surgery (A) recovers 273/350 = 78% overall against 289/350 = 83% for percutaneous
  nephrolithotomy (B), yet A is better for small stones (81/87 = 93% vs 234/270 = 87%) and for
  large stones (192/263 = 73% vs 55/80 = 69%). Stone size confounds treatment and recovery, so
  ``P(recovery | do(A)) = sum_s P(recovery | A, s) P(s) = 0.8325 > P(recovery | do(B)) = 0.7789``.
* :func:`firing_squad`: Pearl (2009, sec. 7.1.2). A court order ``U`` makes the captain signal
  ``C``; riflemen ``A`` and ``B`` shoot on the signal (``A`` also shoots out of nervousness ``W``);
  the prisoner dies ``D = A or B``. Counterfactual: given the prisoner is dead, had ``A`` not shot
  he would be dead with probability ``P(U | D) = p / (p + (1 - p) q)``.
* :func:`response_types`: a two-variable SCM ``Y = f_U(X)`` with the four response types
  (never, helped, hurt, always) listed explicitly, so PN and PS are hand-computable:
  ``PN = P(helped) / (P(helped) + P(always))``, ``PS = P(helped) / (P(helped) + P(never))``.
"""

from __future__ import annotations

import numpy as np

from causal_ext.unico.network import DiscreteBN

__all__ = ["KIDNEY_COUNTS", "firing_squad", "kidney_stones", "response_types"]

KIDNEY_COUNTS: dict[tuple[str, str], tuple[int, int]] = {
    ("A", "small"): (81, 87),
    ("A", "large"): (192, 263),
    ("B", "small"): (234, 270),
    ("B", "large"): (55, 80),
}
"""(treatment, stone size) -> (recovered, treated), Charig et al. (1986), Table II of Julious & Mullee."""


def kidney_stones() -> DiscreteBN:
    """Size -> Treatment, Size -> Recovery, Treatment -> Recovery with the exact Charig et al. frequencies."""
    c = KIDNEY_COUNTS
    n_size = {s: c[("A", s)][1] + c[("B", s)][1] for s in ("small", "large")}
    total = sum(n_size.values())
    size = np.array([n_size["small"], n_size["large"]]) / total
    treat = np.array([[c[("A", s)][1] / n_size[s], c[("B", s)][1] / n_size[s]] for s in ("small", "large")])
    rec = np.zeros((2, 2, 2))  # (treatment, size, recovery)
    for i, t in enumerate(("A", "B")):
        for j, s in enumerate(("small", "large")):
            r, n = c[(t, s)]
            rec[i, j] = [r / n, 1 - r / n]
    return DiscreteBN(
        {"size": ("small", "large"), "treatment": ("A", "B"), "recovery": ("yes", "no")},
        {"treatment": ("size",), "recovery": ("treatment", "size")},
        {"size": size, "treatment": treat, "recovery": rec},
        name="kidney_stones",
    )


def _det(table_fn, cards: tuple[int, ...], k: int = 2) -> np.ndarray:
    out = np.zeros(cards + (k,))
    for idx in np.ndindex(*cards):
        out[idx + (int(table_fn(*idx)),)] = 1.0
    return out


def firing_squad(p: float = 0.5, q: float = 0.0) -> DiscreteBN:
    """Pearl's firing squad with court-order probability ``p`` and rifleman A's nervousness ``q``.

    Variables (states ``no``, ``yes``): latent ``court_order`` (U) and ``nervous`` (W); ``captain`` =
    U; ``rifleman_a`` = C or W; ``rifleman_b`` = C; ``death`` = A or B.
    """
    if not (0 <= p <= 1 and 0 <= q <= 1):
        raise ValueError(f"p and q must be probabilities; got p={p}, q={q}.")
    yn = ("no", "yes")
    return DiscreteBN(
        {"court_order": yn, "nervous": yn, "captain": yn, "rifleman_a": yn, "rifleman_b": yn, "death": yn},
        {
            "captain": ("court_order",),
            "rifleman_a": ("captain", "nervous"),
            "rifleman_b": ("captain",),
            "death": ("rifleman_a", "rifleman_b"),
        },
        {
            "court_order": np.array([1 - p, p]),
            "nervous": np.array([1 - q, q]),
            "captain": _det(lambda u: u, (2,)),
            "rifleman_a": _det(lambda c, w: c or w, (2, 2)),
            "rifleman_b": _det(lambda c: c, (2,)),
            "death": _det(lambda a, b: a or b, (2, 2)),
        },
        latent=frozenset({"court_order", "nervous"}),
        name="firing_squad",
    )


RESPONSE_TYPES = ("never", "helped", "hurt", "always")


def response_types(p_x: float, p_types: tuple[float, float, float, float]) -> DiscreteBN:
    """``X`` (states 0, 1) and a latent response type ``U`` with ``Y = f_U(X)`` deterministic.

    Args:
        p_x: ``P(X = 1)`` (``X`` is exogenous: independent of ``U``).
        p_types: probabilities of (never, helped, hurt, always), i.e. ``Y = 0``, ``Y = X``,
            ``Y = 1 - X``, ``Y = 1``.
    """
    pt = np.asarray(p_types, dtype=float)
    if pt.shape != (4,) or (pt < 0).any() or not np.isclose(pt.sum(), 1.0):
        raise ValueError(f"p_types must be 4 probabilities summing to 1; got {p_types}.")
    f = {0: lambda x: 0, 1: lambda x: x, 2: lambda x: 1 - x, 3: lambda x: 1}
    y = _det(lambda x, u: f[u](x), (2, 4))
    return DiscreteBN(
        {"x": ("0", "1"), "u": RESPONSE_TYPES, "y": ("0", "1")},
        {"y": ("x", "u")},
        {"x": np.array([1 - p_x, p_x]), "u": pt, "y": y},
        latent=frozenset({"u"}),
        name="response_types",
    )
