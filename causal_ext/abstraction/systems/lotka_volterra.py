"""Predator-prey agents explained by the Lotka-Volterra equations (stochastic, dynamical).

Low level: a well-mixed agent-based model. Agents live in slots (400 prey, 200
predator slots; a slot is alive or empty). In each of ``k = 5`` steps between observation
slices, with ``X`` prey and ``Y`` predators alive at the start of the step:

* each prey is caught with probability ``beta * Y`` (mass action) and, independently,
  gives birth with probability ``alpha``;
* each predator gives birth with probability ``delta * X`` and dies with probability
  ``gamma`` (``gamma_old`` once its age reaches ``old_age``, in the ``ageing`` condition);
* newborns take free slots chosen at random (births beyond capacity are lost); predator
  ages count steps since birth.

Micro-variables per slice ``t = 0, 1, 2``: the alive flags ``prey{t}``, ``pred{t}`` and the
predator ages ``age{t}``. ``alpha, beta, delta, gamma = 0.1, 0.002, 0.001, 0.1`` give the
fixed point ``X = 100, Y = 50``.

High level: the discrete-time Lotka-Volterra map ``X <- X + alpha X - beta X Y``,
``Y <- Y + delta X Y - gamma Y`` applied ``k`` times per slice to population sizes
``X{t}, Y{t}`` (``X0, Y0`` roots, uniform on [40, 160] and [20, 80]). Cells:
``X{t} -> [prey{t}]``, ``Y{t} -> [pred{t}]`` through
:class:`~causal_ext.abstraction.valuemaps.Count` (grounding: that many alive agents in
random slots). The initial ages are unmapped (claimed inert); later ages are internal.

The model is the mean-field limit of the agents, so the valid CAE is the demographic
noise and the nonlinearity of expectations: small, not zero.

Conditions:

* ``valid``: ages do not matter; Lotka-Volterra with the agents' rates.
* ``no_interaction``: the explanation drops the predation terms (``beta = delta = 0``).
* ``ageing``: predators of age >= 20 die with probability 0.6. Initial ages are 0..5
  naturally, so no predator gets old within the 10 observed steps; perturbing the
  (unmapped) initial ages reveals the dependence the explanation leaves out.
"""

from __future__ import annotations

import numpy as np

from causal_ext.abstraction.abstraction import Abstraction
from causal_ext.abstraction.domains import Categorical, FunctionDomain, Uniform
from causal_ext.abstraction.scm import SCM
from causal_ext.abstraction.systems.base import Case, unknown_condition
from causal_ext.abstraction.valuemaps import Count

CONDITIONS = ("valid", "no_interaction", "ageing")
PREY_SLOTS, PRED_SLOTS, STEPS, SLICES = 400, 200, 5, 3
ALPHA, BETA, DELTA, GAMMA = 0.1, 0.002, 0.001, 0.1
PREY_RANGE, PRED_RANGE = (40, 160), (20, 80)


def _place(alive: np.ndarray, births: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Put ``births[i]`` newborns into random free slots of row ``i``; returns (alive, newborn mask)."""
    free = ~alive
    prio = np.where(free, rng.random(alive.shape), np.inf)
    rank = np.argsort(np.argsort(prio, axis=1), axis=1)
    newborn = free & (rank < births[:, None])
    return alive | newborn, newborn


def _flags(lo: int, hi: int, slots: int) -> FunctionDomain:
    """Alive flags with a count uniform on [lo, hi] in random slots (the support of a population)."""
    def sample(n: int, rng: np.random.Generator) -> np.ndarray:
        counts = rng.integers(lo, hi + 1, size=n)
        order = np.argsort(rng.random((n, slots)), axis=1)
        ranks = np.argsort(order, axis=1)
        return (ranks < counts[:, None]).astype(np.int64)
    return FunctionDomain(sample, shape=slots)


def agents(old_age: int | None = None, gamma_old: float = 0.6) -> SCM:
    """The agent-based model; ``old_age`` switches on age-dependent predator death."""
    def step(prey, pred, age, rng):
        prey, pred, age = prey.astype(bool), pred.astype(bool), age.copy()
        for _ in range(STEPS):
            x, y = prey.sum(1), pred.sum(1)
            caught = rng.random(prey.shape) < np.minimum(BETA * y, 1.0)[:, None]
            prey_births = (prey & (rng.random(prey.shape) < ALPHA)).sum(1)
            pred_births = (pred & (rng.random(pred.shape) < np.minimum(DELTA * x, 1.0)[:, None])).sum(1)
            p_death = np.full(pred.shape, GAMMA)
            if old_age is not None:
                p_death = np.where(age >= old_age, gamma_old, GAMMA)
            dies = rng.random(pred.shape) < p_death
            prey = prey & ~caught
            pred = pred & ~dies
            age = np.where(pred, age + 1, age)
            prey, _ = _place(prey, prey_births, rng)
            pred, newborn = _place(pred, pred_births, rng)
            age = np.where(newborn, 0, age)
        return prey.astype(np.int64), pred.astype(np.int64), age

    prey_dom = _flags(*PREY_RANGE, PREY_SLOTS)
    pred_dom = _flags(*PRED_RANGE, PRED_SLOTS)
    ages = Categorical(np.arange(41), shape=PRED_SLOTS)
    m = SCM("predator-prey agents" + (" (ageing)" if old_age is not None else ""))
    m.exogenous("prey0", prey_dom).exogenous("pred0", pred_dom)
    m.exogenous("age0", Categorical(np.arange(6), shape=PRED_SLOTS), ages)
    for t in range(1, SLICES):
        m.group([f"prey{t}", f"pred{t}", f"age{t}"], [f"prey{t - 1}", f"pred{t - 1}", f"age{t - 1}"], step,
                [prey_dom, pred_dom, ages], stochastic=True)
    return m


def lotka_volterra(alpha: float = ALPHA, beta: float = BETA, delta: float = DELTA,
                   gamma: float = GAMMA) -> SCM:
    """The discrete-time Lotka-Volterra map on population sizes, ``k`` steps per slice."""
    def step(x, y):
        x, y = x.astype(float), y.astype(float)
        for _ in range(STEPS):
            x, y = x + alpha * x - beta * x * y, y + delta * x * y - gamma * y
            x, y = np.clip(x, 0, PREY_SLOTS), np.clip(y, 0, PRED_SLOTS)
        return x, y

    e = SCM("lotka-volterra")
    e.exogenous("X0", Uniform(*PREY_RANGE)).exogenous("Y0", Uniform(*PRED_RANGE))
    for t in range(1, SLICES):
        e.group([f"X{t}", f"Y{t}"], [f"X{t - 1}", f"Y{t - 1}"], step,
                [Uniform(*PREY_RANGE), Uniform(*PRED_RANGE)])
    return e


def abstraction() -> Abstraction:
    """Population sizes to alive-flag counts; initial ages unmapped, later ages internal."""
    cells = {}
    for t in range(SLICES):
        cells[f"X{t}"] = [f"prey{t}"]
        cells[f"Y{t}"] = [f"pred{t}"]
    return Abstraction(cells, {k: Count() for k in cells}, unmapped=["age0"],
                       internal=[f"age{t}" for t in range(1, SLICES)])


def build(condition: str = "valid") -> Case:
    """The predator-prey system under ``condition`` (one of :data:`CONDITIONS`)."""
    kind = "discrete counts, stochastic, dynamical"
    settings = {"n_replicates": 8}
    if condition == "valid":
        return Case("lotka_volterra", condition, True, agents(), lotka_volterra(), abstraction(),
                    "well-mixed predator-prey agents explained by Lotka-Volterra", settings, kind)
    if condition == "no_interaction":
        return Case("lotka_volterra", condition, False, agents(), lotka_volterra(beta=0.0, delta=0.0),
                    abstraction(), "explanation without predation (independent growth and decay)", settings,
                    kind)
    if condition == "ageing":
        return Case("lotka_volterra", condition, False, agents(old_age=20), lotka_volterra(), abstraction(),
                    "old predators die faster; initial ages (unmapped) are young in normal runs", settings,
                    kind)
    raise unknown_condition("lotka_volterra", condition, CONDITIONS)


__all__ = ["CONDITIONS", "abstraction", "agents", "build", "lotka_volterra"]
