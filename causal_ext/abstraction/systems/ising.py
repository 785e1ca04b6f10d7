"""Ising chain with majority-rule block spins (discrete, stochastic, equilibrium).

Low level: an open Ising chain of ``4`` blocks of ``3`` spins at inverse temperature 1,
coupling ``J_in = 2.0`` inside a block and ``J_out = 0.8`` across block borders, in a
uniform field ``h``. Spins are drawn exactly from the Boltzmann distribution (all
``2^12`` states are enumerated), so clamping some spins (an intervention on an
equilibrium system) gives the exact conditional law of the others. Micro-variables:
``h`` and the spin blocks ``s0..s3`` (vectors of 3 spins in {-1, +1}).

High level: the coarse Ising chain of block spins ``sigma0..sigma3`` with an effective
coupling ``J'`` and field ``c h``, likewise sampled exactly (16 states). ``J'`` and ``c``
are fitted once by minimising the Kullback-Leibler divergence from the exact
observational block-spin distribution of the fine chain to the coarse one, summed over a
grid of 11 fields (the Monte Carlo renormalisation-group recipe, done exactly). Cells:
``h -> [h]`` (identity), ``sigma_k -> [s_k]`` through
:class:`~causal_ext.abstraction.valuemaps.Majority` (grounding: a configuration drawn
uniformly among those with that majority).

The coarse chain is the best model of its family but not exact, least of all under
interventions: a clamped block ``(+, +, -)`` pulls on its neighbours less than
``(+, +, +)``. The valid CAE is therefore clearly positive; the invalid explanations
are further away.

Conditions:

* ``valid``: the fitted coarse chain.
* ``independent_blocks``: the explanation says blocks do not interact (``J' = 0``).
* ``antiferromagnetic``: the explanation has the coupling's sign wrong (``-J'``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from causal_ext.abstraction.abstraction import Abstraction
from causal_ext.abstraction.domains import Categorical, Uniform
from causal_ext.abstraction.scm import SCM, Clamp
from causal_ext.abstraction.systems.base import Case, unknown_condition
from causal_ext.abstraction.valuemaps import Identity, Majority

CONDITIONS = ("valid", "independent_blocks", "antiferromagnetic")
N_BLOCKS, BLOCK, J_IN, J_OUT, FIELD = 4, 3, 2.0, 0.8, 0.5


class Chain:
    """Exact Boltzmann sampling of an open Ising chain of ``n_blocks * block`` spins, with clamps."""

    def __init__(self, n_blocks: int, block: int, j_in: float, j_out: float) -> None:
        self.n_blocks, self.block = n_blocks, block
        n = n_blocks * block
        self.states = np.array(list(itertools.product([-1, 1], repeat=n)), dtype=np.int64)
        w = np.array([j_in if (i + 1) % block else j_out for i in range(n - 1)])
        self.coupling = (self.states[:, :-1] * self.states[:, 1:]) @ w
        self.magnetisation = self.states.sum(1)

    def log_weights(self, h: float) -> np.ndarray:
        """``-E`` of every state in field ``h``."""
        return self.coupling + h * self.magnetisation

    def sample(self, h: np.ndarray, clamps: Mapping[int, Clamp], rng: np.random.Generator) -> np.ndarray:
        """One state per row, conditioned on the clamped blocks ``{block index: Clamp}``; ``[n, spins]``."""
        n = len(h)
        b = self.block
        keys = [np.asarray(h, dtype=float)[:, None]]
        for k in sorted(clamps):
            c = clamps[k]
            mask = np.ones(n, dtype=bool) if c.mask is None else c.mask
            keys.append(np.where(mask[:, None], np.asarray(c.values).reshape(n, b), 0).astype(float))
        uniq, inverse = np.unique(np.concatenate(keys, axis=1), axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        out = np.empty((n, self.states.shape[1]), dtype=np.int64)
        for u, key in enumerate(uniq):
            rows = np.flatnonzero(inverse == u)
            lw = self.log_weights(key[0])
            for j, k in enumerate(sorted(clamps)):
                spins = key[1 + j * b:1 + (j + 1) * b]
                if np.any(spins != 0):
                    ok = np.all(self.states[:, k * b:(k + 1) * b] == spins, axis=1)
                    lw = np.where(ok, lw, -np.inf)
            p = np.exp(lw - lw.max())
            out[rows] = self.states[rng.choice(len(p), size=len(rows), p=p / p.sum())]
        return out


@lru_cache(maxsize=4)
def _fine() -> Chain:
    return Chain(N_BLOCKS, BLOCK, J_IN, J_OUT)


@lru_cache(maxsize=4)
def _block_codes() -> np.ndarray:
    blocks = np.sign(_fine().states.reshape(-1, N_BLOCKS, BLOCK).sum(2))
    return ((blocks > 0) * (1 << np.arange(N_BLOCKS))).sum(1)


@lru_cache(maxsize=1)
def calibrate() -> tuple[float, float]:
    """``(J', c)`` of the coarse chain closest in KL to the fine chain's block spins (module docstring)."""
    from scipy.optimize import minimize

    fine, codes = _fine(), _block_codes()
    coarse = Chain(N_BLOCKS, 1, 0.0, 1.0)
    targets = []
    for h in np.linspace(-FIELD, FIELD, 11):
        lw = fine.log_weights(h)
        p = np.exp(lw - lw.max())
        targets.append(np.bincount(codes, p / p.sum(), minlength=2 ** N_BLOCKS))
    # Chain states enumerate spin 0 as the most significant bit; block codes use bit k for block k
    order = ((coarse.states > 0) * (1 << np.arange(N_BLOCKS))).sum(1)

    def kl(theta: np.ndarray) -> float:
        total = 0.0
        for h, q in zip(np.linspace(-FIELD, FIELD, 11), targets):
            lw = theta[0] * coarse.coupling + theta[1] * h * coarse.magnetisation
            lp = lw - np.logaddexp.reduce(lw)
            total += float(np.sum(q[order] * (np.log(np.maximum(q[order], 1e-300)) - lp)))
        return total

    res = minimize(kl, x0=np.array([J_OUT, float(BLOCK)]), method="Nelder-Mead",
                   options={"xatol": 1e-6, "fatol": 1e-10, "maxiter": 2000})
    return float(res.x[0]), float(res.x[1])


def fine_chain() -> SCM:
    """The fine chain as an SCM (one clamp-aware node for all spins)."""
    chain = _fine()
    names = [f"s{k}" for k in range(N_BLOCKS)]

    def spins(h, clamps, rng):
        idx = {int(name[1:]): c for name, c in clamps.items()}
        s = chain.sample(h, idx, rng)
        return [s[:, k * BLOCK:(k + 1) * BLOCK] for k in range(N_BLOCKS)]

    m = SCM("ising chain")
    m.exogenous("h", Uniform(-FIELD, FIELD))
    m.group(names, ["h"], spins, [Categorical([-1, 1], shape=BLOCK)] * N_BLOCKS, stochastic=True,
            clamp_aware=True)
    return m


def block_chain(coupling: float, field_scale: float) -> SCM:
    """The coarse chain of block spins with coupling ``J'`` and field ``field_scale * h``."""
    chain = Chain(N_BLOCKS, 1, 0.0, coupling)
    names = [f"sigma{k}" for k in range(N_BLOCKS)]

    def spins(h, clamps, rng):
        idx = {int(name[5:]): Clamp(np.asarray(c.values).reshape(-1, 1), c.mask)
               for name, c in clamps.items()}
        s = chain.sample(field_scale * np.asarray(h, dtype=float), idx, rng)
        return [s[:, k] for k in range(N_BLOCKS)]

    e = SCM("block-spin chain")
    e.exogenous("h", Uniform(-FIELD, FIELD))
    e.group(names, ["h"], spins, [Categorical([-1, 1])] * N_BLOCKS, stochastic=True, clamp_aware=True)
    return e


def abstraction() -> Abstraction:
    """Field to field, block spin to the majority of its block."""
    cells = {"h": ["h"], **{f"sigma{k}": [f"s{k}"] for k in range(N_BLOCKS)}}
    maps = {"h": Identity(), **{f"sigma{k}": Majority() for k in range(N_BLOCKS)}}
    return Abstraction(cells, maps)


def build(condition: str = "valid") -> Case:
    """The Ising chain under ``condition`` (one of :data:`CONDITIONS`)."""
    j, c = calibrate()
    kind = "discrete, stochastic, equilibrium"
    settings = {"n_replicates": 32}
    if condition == "valid":
        return Case("ising", condition, True, fine_chain(), block_chain(j, c), abstraction(),
                    f"majority block spins explained by a fitted coarse chain (J'={j:.3f}, c={c:.3f})",
                    settings, kind)
    if condition == "independent_blocks":
        return Case("ising", condition, False, fine_chain(), block_chain(0.0, c), abstraction(),
                    "explanation without coupling between blocks", settings, kind)
    if condition == "antiferromagnetic":
        return Case("ising", condition, False, fine_chain(), block_chain(-j, c), abstraction(),
                    "explanation with the coupling's sign flipped", settings, kind)
    raise unknown_condition("ising", condition, CONDITIONS)


__all__ = ["CONDITIONS", "Chain", "abstraction", "block_chain", "build", "calibrate", "fine_chain"]
