"""Adaptive integration of sphere-valued token dynamics, batched over initialisations.

Two engines, one contract (:func:`integrate_on_sphere`):

* ``"dopri5"``: an embedded Dormand-Prince 5(4) Runge-Kutta method written in torch (the method behind
  scipy's ``RK45`` and MATLAB's ``ode45``), stepping a whole batch ``[B, n, d]`` of initialisations together
  with **one step size for the batch**: the error of a step is the scaled RMS of the embedded error estimate
  per member, ``sqrt(mean((y5 - y4)^2 / (atol + rtol * max(|y|, |y_new|))^2))``, and the step is accepted if
  the *largest* member error is <= 1, so every member meets the tolerance (the batch steps as its stiffest
  member; time-dependent ``Q(t), K(t), V(t)`` are then evaluated at one ``t``). Step-size update: the standard
  ``h * clip(0.9 * err^(-1/5), 0.2, 10)`` (no increase right after a rejection). Steps are shortened to land
  exactly on the requested output times (no interpolation).
* ``"RK45"`` / ``"DOP853"``: :func:`scipy.integrate.solve_ivp` on the flattened batch (its own step control,
  RMS error over all components), run interval by interval between the output times. Used as the reference
  the torch engine is tested against.

Sphere drift: the exact flow keeps every token on the unit sphere (the velocity is tangent), so the
numerical solution leaves it only by the integration error. Both engines **renormalise each token to unit
length as a drift correction only** (after every accepted step for ``dopri5``, at every output time for the
scipy engines); the largest norm deviation removed this way is reported as ``max_drift`` and is of the order
of the tolerances.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from causal_ext.attention_dynamics.flow import DTYPE

RHS = Callable[[float, Tensor], Tensor]

# Dormand & Prince (1980) tableau: nodes, stages, 5th-order weights, and 5th-minus-4th error weights
_C = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0)
_A = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
)
_B = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84)
_E = (71 / 57600, 0.0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40)

METHODS = ("dopri5", "RK45", "DOP853")


@dataclass
class SphereSolution:
    """Output of :func:`integrate_on_sphere`.

    Attributes:
        times: ``[S]`` output times (the requested grid, starting at ``t0``).
        states: ``[S, B, n, d]`` tokens at those times (unit rows).
        n_steps: accepted steps (``dopri5`` only; ``-1`` for the scipy engines, which do not report them).
        n_rejected: rejected steps (``dopri5`` only; ``-1`` for the scipy engines).
        n_evals: right-hand-side evaluations (each one covers the whole batch).
        max_drift: largest ``| |x| - 1 |`` removed by the renormalisation (drift correction).
    """

    times: np.ndarray
    states: Tensor
    n_steps: int
    n_rejected: int
    n_evals: int
    max_drift: float


def _check_grid(t_eval: np.ndarray | list[float], rtol: float, atol: float, max_step: float) -> np.ndarray:
    t = np.asarray(t_eval, dtype=np.float64)
    if t.ndim != 1 or t.size < 2 or not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
        raise ValueError("t_eval must be a strictly increasing 1-D grid of at least two finite times "
                         "(the first one is the start time)")
    if not (rtol > 0 and atol > 0):
        raise ValueError(f"rtol and atol must be positive, got rtol={rtol}, atol={atol}")
    if not max_step > 0:
        raise ValueError(f"max_step must be positive, got {max_step}")
    return t


def _normalise(y: Tensor) -> tuple[Tensor, float]:
    norms = y.norm(dim=-1, keepdim=True)
    return y / norms, float((norms - 1).abs().max())


def _rms(x: Tensor) -> Tensor:
    """Root mean square over the token and coordinate axes: ``[B, n, d] -> [B]``."""
    return x.pow(2).mean(dim=(-2, -1)).sqrt()


def _dopri5(f: RHS, y0: Tensor, t: np.ndarray, rtol: float, atol: float, max_step: float,
            max_steps: int) -> SphereSolution:
    out = [y0]
    y, tc = y0, float(t[0])
    k1 = f(tc, y)
    n_evals, n_steps, n_rejected, drift = 1, 0, 0, 0.0
    just_rejected = False
    # initial step: 1% of the ratio of state to slope size (first half of Hairer's heuristic, as scipy does)
    scale = atol + rtol * y.abs()
    d0, d1 = float(_rms(y / scale).max()), float(_rms(k1 / scale).max())
    h = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
    h = min(h, max_step, float(t[-1] - t[0]))
    for target in t[1:]:
        target = float(target)
        while tc < target:
            if n_steps + n_rejected >= max_steps:
                raise RuntimeError(f"integration needed more than max_steps={max_steps} steps before "
                                   f"t={tc:.4g}; raise max_steps or loosen rtol/atol")
            h_try = min(h, max_step)
            clipped = tc + h_try >= target - 1e-12 * max(1.0, abs(target))
            if clipped:
                h_try = target - tc
            ks = [k1]
            for i in range(1, 6):
                yi = y + h_try * sum(a * k for a, k in zip(_A[i], ks) if a != 0.0)
                ks.append(f(tc + _C[i] * h_try, yi))
            y_new = y + h_try * sum(b * k for b, k in zip(_B, ks) if b != 0.0)
            k7 = f(tc + h_try, y_new)
            n_evals += 6
            err_vec = h_try * sum(e * k for e, k in zip(_E, [*ks, k7]) if e != 0.0)
            scale = atol + rtol * torch.maximum(y.abs(), y_new.abs())
            err = float(_rms(err_vec / scale).max())
            if not math.isfinite(err):
                raise RuntimeError(f"non-finite step at t={tc:.4g}; the right-hand side blew up")
            if err <= 1.0:
                tc = target if clipped else tc + h_try
                y, removed = _normalise(y_new)
                drift = max(drift, removed)
                k1 = f(tc, y)  # re-evaluated after the drift correction (no FSAL reuse)
                n_evals += 1
                n_steps += 1
                factor = 10.0 if err == 0 else min(10.0, max(0.2, 0.9 * err ** -0.2))
                if just_rejected:  # no growth right after a rejection (Hairer-Norsett-Wanner II.4)
                    factor = min(factor, 1.0)
                h = max(h, h_try * factor) if clipped and factor >= 1 else h_try * factor
                just_rejected = False
            else:
                n_rejected += 1
                just_rejected = True
                h = h_try * max(0.2, 0.9 * err ** -0.2)
                if h < 1e-14 * max(1.0, abs(tc)):
                    raise RuntimeError(f"step size underflow at t={tc:.4g}; the tolerances cannot be met")
        out.append(y)
    return SphereSolution(t, torch.stack(out), n_steps, n_rejected, n_evals, drift)


def _scipy(f: RHS, y0: Tensor, t: np.ndarray, method: str, rtol: float, atol: float,
           max_step: float) -> SphereSolution:
    from scipy.integrate import solve_ivp

    shape = y0.shape

    def fun(tt: float, flat: np.ndarray) -> np.ndarray:
        return f(tt, torch.from_numpy(flat).reshape(shape)).reshape(-1).numpy()

    out, y = [y0], y0
    n_evals, drift = 0, 0.0
    for a, b in zip(t[:-1], t[1:]):
        sol = solve_ivp(fun, (float(a), float(b)), y.reshape(-1).numpy().copy(), method=method, rtol=rtol,
                        atol=atol, max_step=max_step, t_eval=[float(b)])
        if not sol.success:
            raise RuntimeError(f"solve_ivp({method}) failed on [{a:.4g}, {b:.4g}]: {sol.message}")
        n_evals += int(sol.nfev)
        y, removed = _normalise(torch.from_numpy(sol.y[:, -1].copy()).reshape(shape))
        drift = max(drift, removed)
        out.append(y)
    return SphereSolution(t, torch.stack(out), -1, -1, n_evals, drift)


def integrate_on_sphere(f: RHS, y0: Tensor, t_eval: np.ndarray | list[float], *, method: str = "dopri5",
                        rtol: float = 1e-7, atol: float = 1e-9, max_step: float = 1.0,
                        max_steps: int = 200_000) -> SphereSolution:
    """Integrate ``dy/dt = f(t, y)`` for unit-row states ``y0 [B, n, d]`` and return them at ``t_eval``.

    Args:
        f: right-hand side ``f(t, y) -> [B, n, d]`` (tangent to the sphere row by row).
        y0: ``[B, n, d]`` float64 initial states with unit rows.
        t_eval: strictly increasing output times; ``t_eval[0]`` is the start time.
        method: ``"dopri5"`` (batched torch Dormand-Prince 5(4)) or scipy's ``"RK45"`` / ``"DOP853"``.
        rtol, atol: relative and absolute tolerances (per component, see the module docstring).
        max_step: longest step allowed (default 1.0 time unit, so a slow escape from a saddle is not stepped
            over when the local error estimate happens to be small).
        max_steps: guard on accepted plus rejected steps (``dopri5``).
    """
    t = _check_grid(t_eval, rtol, atol, max_step)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    y0 = y0.to(DTYPE)
    if method == "dopri5":
        return _dopri5(f, y0, t, rtol, atol, max_step, max_steps)
    return _scipy(f, y0, t, method, rtol, atol, max_step)
