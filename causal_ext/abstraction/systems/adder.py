"""Ripple-carry 2-bit adder: a gate-level circuit explained by integer arithmetic (discrete, static).

Low level (wires are 0/1 integers): inputs ``A0 A1 B0 B1 C0``; per bit ``i`` the gates
``x_i = A_i xor B_i``, ``S_i = x_i xor c_i``, ``ga_i = x_i and c_i``, ``gb_i = A_i and B_i``,
``C_{i+1} = ga_i or gb_i`` with ``c_0 = C0`` and ``c_1`` the carry entering bit 1; and a
parity probe ``P = S0 xor S1`` that drives nothing (a test point on the board).

High level: ``A, B`` in 0..3 and ``Cin`` in {0, 1} (roots), ``Carry1`` (the internal
carry, majority of ``a0, b0, Cin``), ``Sum`` (two sum bits, from ``Carry1``) and ``Cout``.
Cells: ``A -> [A0, A1]``, ``B -> [B0, B1]``, ``Cin -> [C0]``, ``Carry1 -> [C1]``,
``Sum -> [S0, S1]``, ``Cout -> [C2]``, all through :class:`~causal_ext.abstraction.valuemaps.BitsToInt`;
the gate wires are internal and the probe is unmapped (claimed inert, and it is).

Conditions:

* ``valid``: the circuit above and the correct arithmetic. CAE = 0 exactly.
* ``wrong_gate``: the explanation computes the sum bits with OR where the circuit has XOR.
* ``inverted_internal``: the circuit inverts the carry after computing it (``nC1 = not C1``)
  and inverts it back before bit 1 uses it (``C1r = not nC1``), so input-output behaviour
  is identical. The abstraction maps ``Carry1`` to ``C1`` and names the inverter pair
  unmapped, i.e. claims bit 1 hears the carry through ``C1`` alone. Interventions on the
  mapped variables (including ``C1``) all commute, so the non-faithful CAE is 0; perturbing
  the inverter wires changes the outputs while the explanation predicts no change, so only
  the faithful CAE catches it.
* ``inverted_explanation``: the official ``causal-abstraction-eval`` contrast of the same name
  (``inv_internal`` there): the *explanation* inverts ``Carry1`` and undoes the inversion in
  ``Sum`` and ``Cout``; the circuit is the valid one. Input-output behaviour is identical, so
  observational metrics miss it, but ``Carry1`` itself and interventions on it disagree with
  the circuit, so the CAE catches it with or without faithfulness.
* ``inverted_remapped`` (valid): the same inverted circuit with ``Carry1`` mapped to the
  wire bit 1 actually reads (``C1r``) and ``C1, nC1`` internal; CAE = 0 again.
"""

from __future__ import annotations

import numpy as np

from causal_ext.abstraction.abstraction import Abstraction
from causal_ext.abstraction.domains import Bernoulli, Categorical
from causal_ext.abstraction.scm import SCM
from causal_ext.abstraction.systems.base import Case, unknown_condition
from causal_ext.abstraction.valuemaps import BitsToInt

CONDITIONS = ("valid", "wrong_gate", "inverted_internal", "inverted_explanation", "inverted_remapped")
GATES = ("x0", "ga0", "gb0", "x1", "ga1", "gb1")


def _xor(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.bitwise_xor(a, b)


def _and(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.bitwise_and(a, b)


def _or(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.bitwise_or(a, b)


def _not(a: np.ndarray) -> np.ndarray:
    return 1 - a


def circuit(inverted_carry: bool = False) -> SCM:
    """The gate-level adder; with ``inverted_carry`` the carry into bit 1 passes two inverters."""
    bit = Bernoulli()
    m = SCM("adder-inverted" if inverted_carry else "adder")
    for w in ("A0", "A1", "B0", "B1", "C0"):
        m.exogenous(w, bit)
    m.node("x0", ["A0", "B0"], _xor, bit)
    m.node("S0", ["x0", "C0"], _xor, bit)
    m.node("ga0", ["x0", "C0"], _and, bit)
    m.node("gb0", ["A0", "B0"], _and, bit)
    m.node("C1", ["ga0", "gb0"], _or, bit)
    carry_in = "C1"
    if inverted_carry:
        m.node("nC1", ["C1"], _not, bit)
        m.node("C1r", ["nC1"], _not, bit)
        carry_in = "C1r"
    m.node("x1", ["A1", "B1"], _xor, bit)
    m.node("S1", ["x1", carry_in], _xor, bit)
    m.node("ga1", ["x1", carry_in], _and, bit)
    m.node("gb1", ["A1", "B1"], _and, bit)
    m.node("C2", ["ga1", "gb1"], _or, bit)
    m.node("P", ["S0", "S1"], _xor, bit)
    return m


def arithmetic(sum_gate: str = "xor", inverted_carry: bool = False) -> SCM:
    """The high-level adder; ``sum_gate='or'`` is the wrong-gate explanation, ``inverted_carry`` the
    explanation whose internal carry is inverted and re-inverted by its consumers."""
    flip = (lambda c: 1 - c) if inverted_carry else (lambda c: c)

    def bitsum(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        return (a ^ b ^ c) if sum_gate == "xor" else (a | b | c)

    def carry1(a, b, cin):
        a0, b0 = a & 1, b & 1
        return flip((a0 & b0) | (cin & (a0 ^ b0)))

    def total(a, b, cin, c1):
        return bitsum(a & 1, b & 1, cin) + 2 * bitsum((a >> 1) & 1, (b >> 1) & 1, flip(c1))

    def cout(a, b, c1):
        a1, b1 = (a >> 1) & 1, (b >> 1) & 1
        return (a1 & b1) | (flip(c1) & (a1 ^ b1))

    two, one = Categorical(np.arange(4)), Categorical(np.arange(2))
    e = SCM("arithmetic" + ("-or" if sum_gate != "xor" else "") + ("-inverted" if inverted_carry else ""))
    e.exogenous("A", two).exogenous("B", two).exogenous("Cin", one)
    e.node("Carry1", ["A", "B", "Cin"], carry1, one)
    e.node("Sum", ["A", "B", "Cin", "Carry1"], total, two)
    e.node("Cout", ["A", "B", "Carry1"], cout, one)
    return e


def abstraction(carry_wire: str = "C1", unmapped: tuple[str, ...] = ("P",),
                internal: tuple[str, ...] = GATES) -> Abstraction:
    """Operands and results to their wires (module docstring)."""
    cells = {"A": ["A0", "A1"], "B": ["B0", "B1"], "Cin": ["C0"], "Carry1": [carry_wire], "Sum": ["S0", "S1"],
             "Cout": ["C2"]}
    return Abstraction(cells, {k: BitsToInt() for k in cells}, unmapped=unmapped, internal=internal)


def build(condition: str = "valid") -> Case:
    """The adder under ``condition`` (one of :data:`CONDITIONS`)."""
    kind = "discrete, static"
    if condition == "valid":
        return Case("adder", condition, True, circuit(), arithmetic(), abstraction(),
                    "gate-level ripple-carry adder explained by integer addition", kind=kind)
    if condition == "wrong_gate":
        return Case("adder", condition, False, circuit(), arithmetic("or"), abstraction(),
                    "explanation uses OR where the circuit uses XOR for the sum bits", kind=kind)
    if condition == "inverted_internal":
        return Case("adder", condition, False, circuit(True), arithmetic(),
                    abstraction(unmapped=("P", "nC1", "C1r")),
                    "carry inverted and re-inverted downstream; the inverter pair is claimed inert",
                    kind=kind)
    if condition == "inverted_explanation":
        return Case("adder", condition, False, circuit(), arithmetic(inverted_carry=True), abstraction(),
                    "explanation inverts its internal carry and compensates downstream", kind=kind)
    if condition == "inverted_remapped":
        return Case("adder", condition, True, circuit(True), arithmetic(),
                    abstraction(carry_wire="C1r", internal=(*GATES, "C1", "nC1")),
                    "same inverted circuit, carry mapped to the wire bit 1 reads", kind=kind)
    raise unknown_condition("adder", condition, CONDITIONS)


__all__ = ["CONDITIONS", "abstraction", "arithmetic", "build", "circuit"]
