"""1-D heat equation: a fine finite-difference rod explained by a coarse diffusion of block means.

Low level: a rod of ``N = 16`` cells with insulated ends, explicit finite differences
``u_i <- u_i + r (u_{i-1} - 2 u_i + u_{i+1})`` with ``r = 0.2``, observed at three
slices ``t = 0, 1, 2`` that are ``k = 60`` steps apart. The micro-variables are the
temperatures of each block of ``b = 4`` cells at each slice (``u{t}_{j}``, vectors of 4),
plus a heater under cell 5 whose power is naturally 0 (``heater``, an unmapped variable
whose domain is ``[0, 1]``); ``coupling`` says how strongly it heats (0 = disconnected).

High level: block temperatures ``T{t}_{j}`` (``T0_*`` are roots), evolved slice to slice
by the textbook coarse-graining: the same diffusion on a grid ``b`` times coarser, i.e.
``k_c = 10`` coarse steps of ``r_c = r k / (b^2 k_c)``. Cells ``T{t}_{j} -> [u{t}_{j}]``
through :class:`~causal_ext.abstraction.valuemaps.Mean` (grounding: a flat block).

The coarse model is not exact (it ignores the profile inside a block), so the valid CAE is
small but not zero; it shrinks as the slices get longer than the within-block mixing time.

Conditions:

* ``valid``: heater disconnected; the coarse model above.
* ``wrong_diffusivity``: the explanation scales the diffusivity by ``1/b`` instead of
  ``1/b^2`` (a 4x too fast coarse diffusion).
* ``hidden_heater``: the heater is connected (``coupling = 0.01`` per step), but off in
  normal operation; the explanation claims it is inert. Only the faithfulness
  perturbations switch it on, so only the faithful CAE sees it.
"""

from __future__ import annotations

import numpy as np

from causal_ext.abstraction.abstraction import Abstraction
from causal_ext.abstraction.domains import Constant, Uniform
from causal_ext.abstraction.scm import SCM
from causal_ext.abstraction.systems.base import Case, unknown_condition
from causal_ext.abstraction.valuemaps import Mean

CONDITIONS = ("valid", "wrong_diffusivity", "hidden_heater")
N_CELLS, BLOCK, R, STEPS, COARSE_STEPS, SLICES, HEATER_CELL = 16, 4, 0.2, 60, 10, 3, 5


def step_matrix(n: int, r: float) -> np.ndarray:
    """One explicit diffusion step on ``n`` cells with insulated (reflecting) ends."""
    a = np.eye(n) * (1 - 2 * r)
    idx = np.arange(n)
    np.add.at(a, (idx, np.maximum(idx - 1, 0)), r)
    np.add.at(a, (idx, np.minimum(idx + 1, n - 1)), r)
    return a


def rod(coupling: float = 0.0) -> SCM:
    """The fine rod with a heater of strength ``coupling`` (0: disconnected)."""
    n_blocks = N_CELLS // BLOCK
    a = step_matrix(N_CELLS, R)
    ak = np.linalg.matrix_power(a, STEPS)
    # heat injected at HEATER_CELL in each of the k steps, diffused by the remaining steps
    inject = sum(np.linalg.matrix_power(a, STEPS - 1 - s)[:, HEATER_CELL] for s in range(STEPS)) * coupling
    cell = Uniform(0.0, 1.0, shape=BLOCK)

    def evolve(*args):
        *blocks, heater = args
        u = np.concatenate(blocks, axis=1) @ ak.T + heater[:, None] * inject[None, :]
        return [u[:, j * BLOCK:(j + 1) * BLOCK] for j in range(n_blocks)]

    m = SCM("rod" if coupling == 0 else "rod-heater")
    m.exogenous("heater", Constant(0.0), Uniform(0.0, 1.0))
    for j in range(n_blocks):
        m.exogenous(f"u0_{j}", cell)
    for t in range(1, SLICES):
        prev = [f"u{t - 1}_{j}" for j in range(n_blocks)]
        m.group([f"u{t}_{j}" for j in range(n_blocks)], [*prev, "heater"], evolve, [cell] * n_blocks)
    return m


def coarse(diffusivity_scale: float) -> SCM:
    """Coarse diffusion of block means with ``r_c = r k * diffusivity_scale / k_c``."""
    n_blocks = N_CELLS // BLOCK
    rc = R * STEPS * diffusivity_scale / COARSE_STEPS
    ck = np.linalg.matrix_power(step_matrix(n_blocks, rc), COARSE_STEPS)
    temp = Uniform(0.0, 1.0)

    def evolve(*temps):
        t = np.stack(temps, axis=1) @ ck.T
        return [t[:, j] for j in range(n_blocks)]

    e = SCM("coarse-diffusion")
    for j in range(n_blocks):
        e.exogenous(f"T0_{j}", temp)
    for t in range(1, SLICES):
        e.group([f"T{t}_{j}" for j in range(n_blocks)], [f"T{t - 1}_{j}" for j in range(n_blocks)], evolve,
                [temp] * n_blocks)
    return e


def abstraction() -> Abstraction:
    """Block temperatures to the block's cells; the heater unmapped."""
    n_blocks = N_CELLS // BLOCK
    cells = {f"T{t}_{j}": [f"u{t}_{j}"] for t in range(SLICES) for j in range(n_blocks)}
    return Abstraction(cells, {k: Mean() for k in cells}, unmapped=["heater"])


def build(condition: str = "valid") -> Case:
    """The rod under ``condition`` (one of :data:`CONDITIONS`)."""
    kind = "continuous, dynamical"
    valid_scale = 1.0 / BLOCK ** 2
    settings: dict = {}
    if condition == "valid":
        return Case("heat", condition, True, rod(), coarse(valid_scale), abstraction(),
                    "fine rod explained by coarse diffusion of block means", settings, kind)
    if condition == "wrong_diffusivity":
        return Case("heat", condition, False, rod(), coarse(1.0 / BLOCK), abstraction(),
                    "coarse diffusivity scaled by 1/b instead of 1/b^2", settings, kind)
    if condition == "hidden_heater":
        return Case("heat", condition, False, rod(coupling=0.01), coarse(valid_scale), abstraction(),
                    "a connected heater, off in normal operation, claimed inert", settings, kind)
    raise unknown_condition("heat", condition, CONDITIONS)


__all__ = ["CONDITIONS", "abstraction", "build", "coarse", "rod", "step_matrix"]
