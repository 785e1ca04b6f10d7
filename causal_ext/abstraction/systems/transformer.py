"""A small compiled transformer circuit explained by a counting program (neural, static).

Low level: a one-layer attention-plus-MLP transformer, weights set by hand (as a
RASP/tracr-style compiler would) to answer "does the sequence of 5 tokens from {a, b}
contain more a's than b's?". A BOS token sits at position 0; the answer is read at the
last position. Residual stream of width 6 (one-hot token features ``bos, a, b``, a
``count`` direction, an ``aux`` direction, a spare). At the last position:

* head 1 (the counter) attends uniformly to the 5 tokens (BOS masked by a -30 score) and
  writes the fraction of a's onto ``count``;
* head 2 (the BOS sink) attends to BOS and writes a constant 1 onto ``aux``;
* the MLP reads the residual ``r`` and computes ``z = 5 r_count - 2.5 + gamma (r_aux - 1)``
  with two ReLU units (``relu(z) - relu(-z)``), and the logit is ``10 z``.

Micro-variables: ``tokens`` (0/1, 1 = a), the two heads' outputs ``head1``, ``head2``, the
residual ``resid``, the MLP ``hidden`` units and the ``logit``. A head's domain (what
bottom-up interventions and perturbations draw) is the image of its OV circuit: multiples
of the one direction it writes (``count``: uniform in [0, 1]; ``aux``: standard normal).

High level: ``Tokens -> Count = number of a's -> Output = [Count > 2.5]``. Cells:
``Tokens -> [tokens]`` (identity), ``Count -> [head1]`` (projection on ``count`` times 5),
``Output -> [logit]`` (positive logit). ``resid`` and ``hidden`` are internal; head 2's
output is unmapped (claimed inert).

Conditions:

* ``valid``: ``gamma = 0`` (nothing reads ``aux``). CAE = 0 exactly.
* ``wrong_threshold``: the explanation says the answer is "at least two a's".
* ``backup_head``: ``gamma = 2``: the MLP also reads head 2, whose output is constant on
  every input, so input-output behaviour and every intervention on the mapped
  variables are unchanged; perturbing head 2 moves the answer (a dormant pathway, as in
  backup or "hydra" heads), which only the faithful CAE sees.
"""

from __future__ import annotations

import numpy as np

from causal_ext.abstraction.abstraction import Abstraction
from causal_ext.abstraction.domains import Bernoulli, Categorical, FunctionDomain, Normal
from causal_ext.abstraction.scm import SCM
from causal_ext.abstraction.systems.base import Case, unknown_condition
from causal_ext.abstraction.valuemaps import Identity, Projection, Threshold

CONDITIONS = ("valid", "wrong_threshold", "backup_head")
LENGTH, WIDTH = 5, 6
BOS, TOK_A, TOK_B, COUNT, AUX = 0, 1, 2, 3, 4


def _unit(i: int) -> np.ndarray:
    e = np.zeros(WIDTH)
    e[i] = 1.0
    return e


def weights(gamma: float = 0.0) -> dict[str, np.ndarray]:
    """The hand-set weights: QK and OV matrices of both heads, MLP in/out."""
    query = _unit(TOK_A) + _unit(TOK_B)
    read = 5.0 * _unit(COUNT) + gamma * _unit(AUX)
    return {
        "qk1": -30.0 * np.outer(query, _unit(BOS)),
        "ov1": np.outer(_unit(COUNT), _unit(TOK_A)),
        "qk2": 30.0 * np.outer(query, _unit(BOS)),
        "ov2": np.outer(_unit(AUX), _unit(BOS)),
        "w_in": np.stack([read, -read]),
        "b_in": np.array([-2.5 - gamma, 2.5 + gamma]),
        "w_out": np.array([10.0, -10.0]),
    }


def embed(tokens: np.ndarray) -> np.ndarray:
    """Residual stream ``[n, 1 + LENGTH, WIDTH]`` at the input: BOS then the one-hot tokens."""
    n = len(tokens)
    x = np.zeros((n, 1 + LENGTH, WIDTH))
    x[:, 0, BOS] = 1.0
    x[:, 1:, TOK_A] = tokens
    x[:, 1:, TOK_B] = 1 - tokens
    return x


def _head(x: np.ndarray, qk: np.ndarray, ov: np.ndarray) -> np.ndarray:
    q = x[:, -1, :]
    scores = np.einsum("nd,de,nte->nt", q, qk, x)
    att = np.exp(scores - scores.max(1, keepdims=True))
    att /= att.sum(1, keepdims=True)
    return np.einsum("nt,nte,fe->nf", att, x, ov)


def network(gamma: float = 0.0) -> SCM:
    """The compiled transformer; ``gamma`` is how strongly the MLP reads head 2."""
    w = weights(gamma)
    vec = Normal(0.0, 1.0, shape=WIDTH)

    def along(direction: int, draw):
        """Values a head can write: multiples of the one direction its OV circuit maps onto."""
        return FunctionDomain(lambda n, rng: draw(n, rng)[:, None] * _unit(direction)[None, :], shape=WIDTH)

    m = SCM("compiled transformer" + (f" (gamma={gamma})" if gamma else ""))
    m.exogenous("tokens", Bernoulli(0.5, shape=LENGTH))
    m.node("head1", ["tokens"], lambda t: _head(embed(t), w["qk1"], w["ov1"]),
           along(COUNT, lambda n, rng: rng.random(n)))
    m.node("head2", ["tokens"], lambda t: _head(embed(t), w["qk2"], w["ov2"]),
           along(AUX, lambda n, rng: rng.normal(0.0, 1.0, n)))
    m.node("resid", ["tokens", "head1", "head2"], lambda t, h1, h2: embed(t)[:, -1, :] + h1 + h2, vec)
    m.node("hidden", ["resid"], lambda r: np.maximum(r @ w["w_in"].T + w["b_in"], 0.0),
           Normal(0.0, 1.0, shape=2))
    m.node("logit", ["hidden"], lambda h: h @ w["w_out"], Normal(0.0, 10.0))
    return m


def program(threshold: float = 2.5) -> SCM:
    """``Count = #a``, ``Output = [Count > threshold]``."""
    e = SCM("counting program")
    e.exogenous("Tokens", Bernoulli(0.5, shape=LENGTH))
    e.node("Count", ["Tokens"], lambda t: t.sum(1).astype(float), Categorical(np.arange(LENGTH + 1)))
    e.node("Output", ["Count"], lambda c: (c > threshold).astype(np.int64), Categorical([0, 1]))
    return e


def abstraction() -> Abstraction:
    """Tokens, count and answer to their activations (module docstring)."""
    cells = {"Tokens": ["tokens"], "Count": ["head1"], "Output": ["logit"]}
    maps = {"Tokens": Identity(), "Count": Projection(_unit(COUNT), scale=float(LENGTH)),
            "Output": Threshold(0.0, margin=10.0)}
    return Abstraction(cells, maps, unmapped=["head2"], internal=["resid", "hidden"])


def build(condition: str = "valid") -> Case:
    """The transformer under ``condition`` (one of :data:`CONDITIONS`)."""
    kind = "neural, static"
    if condition == "valid":
        return Case("transformer", condition, True, network(), program(), abstraction(),
                    "compiled counting transformer explained by its program", kind=kind)
    if condition == "wrong_threshold":
        return Case("transformer", condition, False, network(), program(1.5), abstraction(),
                    "explanation answers 'at least two a's'", kind=kind)
    if condition == "backup_head":
        return Case("transformer", condition, False, network(gamma=2.0), program(), abstraction(),
                    "MLP also reads a head whose output is constant in normal runs; head claimed inert",
                    kind=kind)
    raise unknown_condition("transformer", condition, CONDITIONS)


__all__ = ["CONDITIONS", "abstraction", "build", "network", "program", "weights"]
