"""Ready-made SCBMs for the three adjustment strategies, with known bottlenecks and effects.

Each builder draws Gaussian bottleneck maps and loadings from ``seed`` and
returns a :class:`Scenario`: the model, the roles of its nodes, the bottleneck
the strategy should use and the true target effect (closed form, linear SCBM).
Bottleneck rows are scaled by ``1/sqrt(input dim)`` so each bottleneck
coordinate has variance of order one whatever the node dimension.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import block_diag

from causal_ext.bottleneck.scm import SCBM, Node

__all__ = ["Scenario", "iv_scenario", "backdoor_scenario", "nonlinear_backdoor_scenario",
           "mediation_scenario", "mechanism_scenario"]


@dataclass(frozen=True)
class Scenario:
    """An SCBM plus what a strategy needs to be checked against.

    Attributes:
        scm: the model.
        roles: role -> node name (e.g. ``{"instrument": "Z", "treatment": "X", "outcome": "Y"}``).
        bottleneck: the true bottleneck map the strategy adjusts with, ``(r, d)``.
        effect: the true target effect (see each builder).
        extra: other known quantities (e.g. direct and total effects).
    """

    scm: SCBM
    roles: dict[str, str]
    bottleneck: np.ndarray
    effect: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    def sample(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``n`` samples of the observed nodes, keyed by role."""
        data = self.scm.sample(n, rng)
        return {role: data[name] for role, name in self.roles.items()}


def _gauss(rng: np.random.Generator, rows: int, cols: int, scale: float = 1.0) -> np.ndarray:
    return scale * rng.standard_normal((rows, cols))


def _check_dims(**dims: int) -> None:
    bad = {k: v for k, v in dims.items() if int(v) < 1}
    if bad:
        raise ValueError(f"dimensions must be >= 1; got {bad}")


def iv_scenario(d_z: int = 3, d_x: int = 30, d_y: int = 10, rank: int = 2, d_h: int = 2, *,
                first_stage_rank: int | None = None, instrument_strength: float = 1.0,
                confounding: float = 1.0, noise: float = 1.0, seed: int = 0) -> Scenario:
    """Instrument ``Z -> X -> Y`` with a hidden confounder ``H -> X, H -> Y``.

    ``X := strength * A_x b_x(Z) + confounding * C_x H + noise`` with ``b_x`` the
    identity (or a rank-``first_stage_rank`` bottleneck: then even ``d_z >= d_x``
    leaves the first stage rank-deficient), and
    ``Y := A_y B_y X + confounding * C_y H + noise`` with a rank-``rank``
    bottleneck ``B_y``. ``effect`` is the ``(d_y, d_x)`` effect ``A_y B_y`` of
    ``X`` on ``Y``; ``bottleneck`` is ``B_y``.
    """
    _check_dims(d_z=d_z, d_x=d_x, d_y=d_y, rank=rank, d_h=d_h)
    rng = np.random.default_rng(seed)
    if first_stage_rank is None:
        b_x, r_x = np.eye(d_z), d_z
    else:
        _check_dims(first_stage_rank=first_stage_rank)
        b_x, r_x = _gauss(rng, first_stage_rank, d_z, d_z ** -0.5), first_stage_rank
    a_x = _gauss(rng, d_x, r_x, instrument_strength)
    c_x = _gauss(rng, d_x, d_h, confounding)
    b_y = _gauss(rng, rank, d_x, d_x ** -0.5)
    a_y = _gauss(rng, d_y, rank)
    c_y = _gauss(rng, d_y, d_h, confounding)
    scm = SCBM([
        Node("Z", d_z),
        Node("H", d_h, observed=False),
        Node("X", d_x, ("Z", "H"), block_diag(b_x, np.eye(d_h)), np.hstack([a_x, c_x]), noise),
        Node("Y", d_y, ("X", "H"), block_diag(b_y, np.eye(d_h)), np.hstack([a_y, c_y]), noise),
    ])
    return Scenario(scm, {"instrument": "Z", "treatment": "X", "outcome": "Y"}, b_y,
                    scm.total_effect("X", "Y"), {"first_stage_rank": np.array(min(r_x, d_x))})


def backdoor_scenario(d_c: int = 50, d_y: int = 5, rank: int = 2, d_t: int = 1, *,
                      confounding: float = 1.0, treatment_noise: float = 1.0, outcome_noise: float = 1.0,
                      seed: int = 0) -> Scenario:
    """Confounder ``C -> T``, ``C -> Y``, ``T -> Y``, both mechanisms reading ``C`` through ``b(C) = B C``.

    ``T := confounding * a_t b(C) + treatment_noise * N_T`` and
    ``Y := tau T + confounding * A_y b(C) + outcome_noise * N_Y``. Both ``C`` and
    ``b(C)`` are valid adjustment sets; ``effect`` is ``tau`` ``(d_y, d_t)``,
    ``bottleneck`` is ``B`` ``(rank, d_c)``.
    """
    _check_dims(d_c=d_c, d_y=d_y, rank=rank, d_t=d_t)
    rng = np.random.default_rng(seed)
    b_c = _gauss(rng, rank, d_c, d_c ** -0.5)
    a_t = _gauss(rng, d_t, rank, confounding)
    tau = _gauss(rng, d_y, d_t)
    a_y = _gauss(rng, d_y, rank, confounding)
    scm = SCBM([
        Node("C", d_c),
        Node("T", d_t, ("C",), b_c, a_t, treatment_noise),
        Node("Y", d_y, ("T", "C"), block_diag(np.eye(d_t), b_c), np.hstack([tau, a_y]), outcome_noise),
    ])
    return Scenario(scm, {"confounder": "C", "treatment": "T", "outcome": "Y"}, b_c,
                    scm.total_effect("T", "Y"))


def nonlinear_backdoor_scenario(d_c: int = 20, d_y: int = 3, rank: int = 2, *, activation: str = "square",
                                confounding: float = 1.0, treatment_noise: float = 1.0,
                                outcome_noise: float = 1.0, seed: int = 0) -> Scenario:
    """Backdoor design whose bottleneck is nonlinear in the confounder: ``b(C) = φ(B C)``.

    ``S := φ(B C)`` is a latent node (``rank`` dimensions, no noise), ``T :=
    confounding * a_t S + treatment_noise * N_T`` (one treatment) and ``Y := tau T +
    confounding * A_y S + outcome_noise * N_Y``. ``C`` acts on ``T`` and ``Y`` only
    through ``S``, so ``S`` (or any bijection of it) is a valid adjustment set, but
    with ``φ = square`` (default) ``S`` is uncorrelated with every linear function of
    ``C``: linear adjustment for ``C`` and a linear (reduced-rank) bottleneck both miss
    it. ``effect`` is ``tau`` ``(d_y, 1)``; ``bottleneck`` is the inner map ``B``
    ``(rank, d_c)``; the role ``"bottleneck"`` samples ``S`` itself (for checks only).
    """
    _check_dims(d_c=d_c, d_y=d_y, rank=rank)
    if activation not in ("square", "tanh"):
        raise ValueError(f"activation must be 'square' or 'tanh' (a nonlinear bottleneck); "
                         f"got {activation!r}")
    rng = np.random.default_rng(seed)
    b_c = _gauss(rng, rank, d_c, d_c ** -0.5)
    a_t = _gauss(rng, 1, rank, confounding)
    tau = _gauss(rng, d_y, 1)
    a_y = _gauss(rng, d_y, rank, confounding)
    scm = SCBM([
        Node("C", d_c),
        Node("S", rank, ("C",), b_c, np.eye(rank), 0.0, activation, observed=False),
        Node("T", 1, ("S",), np.eye(rank), a_t, treatment_noise),
        Node("Y", d_y, ("T", "S"), np.eye(1 + rank), np.hstack([tau, a_y]), outcome_noise),
    ])
    return Scenario(scm, {"confounder": "C", "treatment": "T", "outcome": "Y", "bottleneck": "S"}, b_c,
                    scm.direct_effect_matrix("Y", "T"))


def mediation_scenario(d_m: int = 30, d_y: int = 5, rank: int = 2, d_t: int = 1, *,
                       mediator_noise: float = 1.0, outcome_noise: float = 1.0, seed: int = 0) -> Scenario:
    """Treatment ``T -> M -> Y`` and ``T -> Y``, with ``Y`` reading the mediator through ``b(M) = B M``.

    ``M := alpha T + mediator_noise * N_M`` and
    ``Y := c T + A_y B M + outcome_noise * N_Y``. ``effect`` is the indirect
    effect through the mediator ``A_y B alpha`` ``(d_y, d_t)``; ``extra`` holds
    ``direct`` (``c``) and ``total`` (their sum, also ``scm.total_effect("T", "Y")``).
    """
    _check_dims(d_m=d_m, d_y=d_y, rank=rank, d_t=d_t)
    rng = np.random.default_rng(seed)
    alpha = _gauss(rng, d_m, d_t)
    b_m = _gauss(rng, rank, d_m, d_m ** -0.5)
    direct = _gauss(rng, d_y, d_t)
    a_y = _gauss(rng, d_y, rank)
    scm = SCBM([
        Node("T", d_t),
        Node("M", d_m, ("T",), np.eye(d_t), alpha, mediator_noise),
        Node("Y", d_y, ("T", "M"), block_diag(np.eye(d_t), b_m), np.hstack([direct, a_y]), outcome_noise),
    ])
    indirect = a_y @ b_m @ alpha
    return Scenario(scm, {"treatment": "T", "mediator": "M", "outcome": "Y"}, b_m, indirect,
                    {"direct": direct, "total": scm.total_effect("T", "Y")})


def mechanism_scenario(d_in: int = 20, d_out: int = 15, rank: int = 3, *, activation: str = "linear",
                       noise: float = 1.0, seed: int = 0) -> Scenario:
    """One mechanism ``X := A φ(B P) + noise`` with Gaussian parents ``P``, for bottleneck recovery.

    ``bottleneck`` is ``B`` ``(rank, d_in)``; ``effect`` is ``A B`` (linear case;
    for ``tanh`` it is the map inside the nonlinearity, kept for reference).
    """
    _check_dims(d_in=d_in, d_out=d_out, rank=rank)
    rng = np.random.default_rng(seed)
    b = _gauss(rng, rank, d_in, d_in ** -0.5)
    a = _gauss(rng, d_out, rank)
    scm = SCBM([Node("P", d_in), Node("X", d_out, ("P",), b, a, noise, activation)])
    return Scenario(scm, {"parents": "P", "child": "X"}, b, a @ b)
