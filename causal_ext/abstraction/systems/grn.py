"""Gene-regulatory network: an mRNA/protein Boolean network explained by a gene-level network.

Low level: four genes ``A, B, C, D`` under a constant input signal ``S``. Each gene has an
mRNA ``m`` and a protein ``p`` (0/1). Synchronous updates over micro-steps ``t = 0..4``:
transcription ``m_g(t+1) = f_g(p(t), S)`` and translation ``p_g(t+1) = m_g(t)`` (in the
``mirna`` condition ``p_D(t+1) = m_D(t) and not miR``) with the regulatory logic

    f_A = S,   f_B = not A,   f_C = A and not B,   f_D = B or C.

High level: gene activities ``G{T}`` at macro-steps ``T = 0, 1, 2`` (roots ``Signal`` and
the four ``G0``), updated by ``G(T+1) = f(G(T), Signal)``. Cells: ``Signal -> [S]``,
``G{T} -> [p_G(2T)]`` (identity on 0/1): a macro-step is transcription plus translation,
so proteins at even times follow the gene network exactly.

The micro-variables split into two interleaved chains: the even one (``p(0), m(1), p(2),
m(3), p(4)``) carries the gene network, the odd one (``m(0), p(1), m(2), p(3), m(4)``) is a
shadow copy that never feeds back into it. The abstraction names the odd chain unmapped
(claimed inert, and it is), the even-chain mRNAs internal, and the microRNA ``miR``
(naturally not expressed) unmapped.

Conditions:

* ``valid``: ``miR`` has no target site; the gene network above. CAE = 0 exactly.
* ``wrong_sign``: the explanation says A *activates* B.
* ``mirna``: ``miR`` blocks translation of D when expressed; it never is in normal runs,
  so only the faithfulness perturbations (which express it) expose the pathway.
"""

from __future__ import annotations

from causal_ext.abstraction.abstraction import Abstraction
from causal_ext.abstraction.domains import Bernoulli, Constant
from causal_ext.abstraction.scm import SCM
from causal_ext.abstraction.systems.base import Case, unknown_condition
from causal_ext.abstraction.valuemaps import Identity

CONDITIONS = ("valid", "wrong_sign", "mirna")
GENES = ("A", "B", "C", "D")
MICRO_STEPS, MACRO_STEPS = 4, 2


def regulation(b_activated_by_a: bool = False):
    """The gene-level update ``f`` as a function of the four activities and the signal."""
    def f(a, b, c, d, s):
        nb = a.copy() if b_activated_by_a else 1 - a
        return s.copy(), nb, a & (1 - b), b | c
    return f


def cells_network(mirna_active: bool = False) -> SCM:
    """The mRNA/protein network; with ``mirna_active`` the microRNA represses D's translation."""
    bit = Bernoulli()
    f = regulation()
    m = SCM("grn-micro" + ("-mirna" if mirna_active else ""))
    m.exogenous("S", bit)
    m.exogenous("miR", Constant(0), bit)
    for g in GENES:
        m.exogenous(f"p{g}0", bit)
        m.exogenous(f"m{g}0", bit)
    for t in range(MICRO_STEPS):
        prot = [f"p{g}{t}" for g in GENES]
        m.group([f"m{g}{t + 1}" for g in GENES], [*prot, "S"], lambda *a: f(*a), [bit] * 4)
        for g in GENES:
            if g == "D" and mirna_active:
                m.node(f"pD{t + 1}", [f"mD{t}", "miR"], lambda x, r: x & (1 - r), bit)
            else:
                m.node(f"p{g}{t + 1}", [f"m{g}{t}"], lambda x: x.copy(), bit)
    return m


def gene_network(b_activated_by_a: bool = False) -> SCM:
    """The gene-level Boolean network over macro-steps."""
    bit = Bernoulli()
    f = regulation(b_activated_by_a)
    e = SCM("gene network")
    e.exogenous("Signal", bit)
    for g in GENES:
        e.exogenous(f"{g}0", bit)
    for t in range(MACRO_STEPS):
        e.group([f"{g}{t + 1}" for g in GENES], [*[f"{g}{t}" for g in GENES], "Signal"], lambda *a: f(*a),
                [bit] * 4)
    return e


def abstraction() -> Abstraction:
    """Gene activity at macro-step T to its protein at micro-step 2T (module docstring)."""
    cells = {"Signal": ["S"], **{f"{g}{t}": [f"p{g}{2 * t}"] for g in GENES for t in range(MACRO_STEPS + 1)}}
    odd = [f"m{g}{t}" for g in GENES for t in range(0, MICRO_STEPS + 1, 2)]
    odd += [f"p{g}{t}" for g in GENES for t in range(1, MICRO_STEPS, 2)]
    internal = [f"m{g}{t}" for g in GENES for t in range(1, MICRO_STEPS, 2)]
    return Abstraction(cells, {k: Identity() for k in cells}, unmapped=[*odd, "miR"], internal=internal)


def build(condition: str = "valid") -> Case:
    """The gene network under ``condition`` (one of :data:`CONDITIONS`)."""
    kind = "discrete, dynamical"
    if condition == "valid":
        return Case("grn", condition, True, cells_network(), gene_network(), abstraction(),
                    "mRNA/protein Boolean network explained by a gene-level network", kind=kind)
    if condition == "wrong_sign":
        return Case("grn", condition, False, cells_network(), gene_network(b_activated_by_a=True),
                    abstraction(), "explanation with A activating B instead of repressing it", kind=kind)
    if condition == "mirna":
        return Case("grn", condition, False, cells_network(mirna_active=True), gene_network(), abstraction(),
                    "a silent microRNA that blocks D's translation when expressed, claimed inert", kind=kind)
    raise unknown_condition("grn", condition, CONDITIONS)


__all__ = ["CONDITIONS", "GENES", "abstraction", "build", "cells_network", "gene_network", "regulation"]
