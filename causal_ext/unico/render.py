"""Render a solved query as text: symbolic, narrative and code forms of the context, question and answer.

The *context* describes the relevant part of the network (the ancestral closure of the variables the
question mentions: the other variables cannot change any answer):

* **symbolic**: single-letter variables, states by index, the edge list and every CPT row;
* **narrative**: the network's domain in words (:mod:`causal_ext.unico.names`), "depends directly
  on" for edges and "the chance that ..." for CPT rows; questions avoid causal jargon ("if we made
  sure that ..." for ``do``, "had ... instead" for counterfactuals);
* **code**: a Python program whose execution *is* the mechanism: ``run(u, force)`` computes every
  variable in topological order as ``draw(u[name], row)`` (inverse-CDF on the CPT row of its parents'
  values) unless ``force`` pins it. Running it with fresh uniform ``u`` samples the network, forcing is
  ``do``, and re-running with the *same* ``u`` is exactly the counterfactual semantics used for the
  answers (:mod:`causal_ext.unico.counterfactual`).

The answer text is the same number (4 decimals) in every rendering; the rationale lists the
derivation in the rendering's notation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from causal_ext.unico.names import Glossary, letters
from causal_ext.unico.network import DiscreteBN
from causal_ext.unico.queries import QUERY_TYPES, Notation, Solution

__all__ = ["RENDERINGS", "Renderer"]

RENDERINGS = ("symbolic", "narrative", "code")
"""The three renderings of every item."""


def _num(p: float) -> str:
    return f"{float(p):.10g}"


def _pct(p: float) -> str:
    return f"{float(p) * 100:.8g}%"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _join(items: Sequence[str], last: str = "and") -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {last} " + items[-1]


def _table_names(variables: Sequence[str]) -> dict[str, str]:
    """A distinct Python identifier ``P_<name>`` for each variable's table (non-word characters -> ``_``)."""
    out: dict[str, str] = {}
    for v in variables:
        base = "P_" + re.sub(r"\W", "_", v)
        name, k = base, 2
        while name in out.values():
            name, k = f"{base}_{k}", k + 1
        out[v] = name
    return out


class Renderer:
    """Renders solutions for one network.

    Args:
        bn: the network the solutions were computed on.
        glossary: narrative names (:func:`causal_ext.unico.names.glossary_for`).
    """

    def __init__(self, bn: DiscreteBN, glossary: Glossary):
        self.bn, self.glossary = bn, glossary

    # ------------------------------------------------------------------ entry point
    def render(self, sol: Solution, rendering: str) -> dict[str, str]:
        """``{"context", "question", "answer_text", "rationale"}`` of ``sol`` in ``rendering``."""
        if rendering not in RENDERINGS:
            raise ValueError(f"rendering must be one of {RENDERINGS}; got {rendering!r}.")
        mention = set(sol.query.variables()) | {v for s in sol.accepted if isinstance(s, list) for v in s}
        sub = self.bn.subnetwork(mention)
        symbols = letters(sub.topological_order())
        note = Notation(self.bn, symbols, state_index=True) if rendering == "symbolic" else Notation(self.bn)
        ctx = {"symbolic": self._ctx_symbolic, "narrative": self._ctx_narrative, "code": self._ctx_code}[
            rendering
        ]
        question = getattr(self, f"_q_{rendering}")(sol, note)
        answer = self.answer_text(sol, rendering, note)
        lines = [f"{f(note)} = {self._value(v)}" for f, v in sol.steps]
        if rendering == "narrative":
            legend = "; ".join(f"{v} = {self.glossary.noun(v)}" for v in sorted(mention))
            lines.insert(0, f"Notation: {legend}.")
        lines.append(f"Answer: {answer}")
        return {
            "context": ctx(sub, symbols),
            "question": question,
            "answer_text": answer,
            "rationale": "\n".join(lines),
        }

    @staticmethod
    def _value(v) -> str:
        if isinstance(v, bool):
            return "yes" if v else "no"
        if isinstance(v, (float, np.floating)):
            return f"{float(v):.4f}"
        if isinstance(v, list):
            return "[" + ", ".join(f"{float(a):.4f}" for a in v) + "]"
        return str(v)

    def answer_text(self, sol: Solution, rendering: str, note: Notation) -> str:
        """The answer as the rendering states it."""
        kind = QUERY_TYPES[sol.query.type].answer_type
        a = sol.answer
        if kind in ("probability", "difference"):
            return f"{float(a):.4f}"
        if kind == "boolean":
            return "yes" if a else "no"
        if kind == "state":
            X = sol.query.roles["X"]
            return {
                "symbolic": f"do({note.e(X, a)})",
                "narrative": self.glossary.clause(X, a),
                "code": repr(a),
            }[rendering]
        if rendering == "symbolic":
            return "{" + ", ".join(note.v(v) for v in a) + "}"
        if rendering == "narrative":
            return _join([self.glossary.noun(v) for v in a]) if a else "none"
        return repr(list(a))

    # ------------------------------------------------------------------ contexts
    def _ctx_symbolic(self, sub: DiscreteBN, sym: dict[str, str]) -> str:
        order = sub.topological_order()
        var_list = ", ".join(f"{sym[v]} {{{', '.join(str(i) for i in range(sub.card(v)))}}}" for v in order)
        lines = [f"Variables and states: {var_list}."]
        hidden = [sym[v] for v in order if v in sub.latent]
        if hidden:
            lines.append(f"Unobserved: {', '.join(hidden)}.")
        edges = [f"{sym[p]} -> {sym[v]}" for v in order for p in sub.parents[v]]
        lines.append(f"Causal graph: {', '.join(edges) if edges else 'no edges'}.")
        lines.append("Mechanisms:")
        for v in order:
            ps, t = sub.parents[v], sub.cpts[v]
            for idx in np.ndindex(*t.shape[:-1]):
                cond = ", ".join(f"{sym[p]}={i}" for p, i in zip(ps, idx))
                row = ", ".join(f"{sym[v]}={k}: {_num(q)}" for k, q in enumerate(t[idx]))
                lines.append(f"P({sym[v]}{' | ' + cond if cond else ''}): {row}")
        return "\n".join(lines)

    def _ctx_narrative(self, sub: DiscreteBN, sym: dict[str, str]) -> str:
        g = self.glossary
        order = sub.topological_order()
        parts = [f"Consider {g.plural}."]
        for v in order:
            if sub.parents[v]:
                parts.append(
                    f"{_cap(g.noun(v))} depends directly on {_join([g.noun(p) for p in sub.parents[v]])}."
                )
        hidden = [g.noun(v) for v in order if v in sub.latent]
        if hidden:
            parts.append(f"{_cap(_join(hidden))} {'is' if len(hidden) == 1 else 'are'} never observed.")
        for v in order:
            ps, t = sub.parents[v], sub.cpts[v]
            for idx in np.ndindex(*t.shape[:-1]):
                cond = _join([g.clause(p, sub.states[p][i]) for p, i in zip(ps, idx)])
                lead = f"When {cond}, the" if ps else f"For a random {g.unit}, the"
                row = t[idx]
                if len(row) == 2:
                    parts.append(
                        f"{lead} chance that {g.clause(v, sub.states[v][0])} is {_pct(row[0])} "
                        f"(otherwise {g.clause(v, sub.states[v][1])})."
                    )
                else:
                    chances = _join([f"{_pct(q)} that {g.clause(v, s)}" for s, q in zip(sub.states[v], row)])
                    parts.append(f"{lead} chances are {chances}.")
        return " ".join(parts)

    def _ctx_code(self, sub: DiscreteBN, sym: dict[str, str]) -> str:
        order = sub.topological_order()
        table = _table_names(order)
        lines = [
            "def draw(u, row):",
            '    """Inverse-CDF sampling: the first state whose cumulative probability exceeds u."""',
            "    total = 0.0",
            "    for state, p in row.items():",
            "        total += p",
            "        if u < total:",
            "            return state",
            "    return state",
            "",
        ]
        for v in order:
            ps, t = sub.parents[v], sub.cpts[v]
            if not ps:
                lines.append(f"{table[v]} = {self._row_literal(sub, v, t)}")
                continue
            lines.append(f"{table[v]} = {{  # ({', '.join(repr(p) for p in ps)}) -> distribution of {v!r}")
            for idx in np.ndindex(*t.shape[:-1]):
                key = (
                    "("
                    + ", ".join(repr(sub.states[p][i]) for p, i in zip(ps, idx))
                    + ("," if len(ps) == 1 else "")
                    + ")"
                )
                lines.append(f"    {key}: {self._row_literal(sub, v, t[idx])},")
            lines.append("}")
        lines += [
            "",
            "",
            "def run(u, force=None):",
            '    """One execution; u[name] are independent Uniform(0, 1) draws, force pins variables."""',
            "    force = force or {}",
            "    v = {}",
        ]
        for v in order:
            ps = sub.parents[v]
            row = (
                table[v]
                if not ps
                else f"{table[v]}[("
                + ", ".join(f"v[{p!r}]" for p in ps)
                + ("," if len(ps) == 1 else "")
                + ")]"
            )
            lines.append(f"    v[{v!r}] = force[{v!r}] if {v!r} in force else draw(u[{v!r}], {row})")
        lines.append("    return v")
        hidden = [v for v in order if v in sub.latent]
        if hidden:
            lines += [
                "",
                f"# Unobserved: {', '.join(repr(h) for h in hidden)} (never shown in observations).",
            ]
        return "\n".join(lines)

    @staticmethod
    def _row_literal(sub: DiscreteBN, v: str, row: np.ndarray) -> str:
        return "{" + ", ".join(f"{s!r}: {_num(q)}" for s, q in zip(sub.states[v], row)) + "}"

    # ------------------------------------------------------------------ questions
    def _q_symbolic(self, sol: Solution, n: Notation) -> str:
        q = sol.query
        t, r, s = q.type, q.roles, q.states
        xps = s.get("x'")
        X, Y = r.get("X"), r.get("Y")
        ex = ((X, s.get("x")),)
        exp_ = ((X, s.get("x'")),)
        ey = ((Y, s.get("y")),)
        if t == "marginal":
            return f"Compute {n.p(ey)}."
        if t == "conditional":
            return f"Compute {n.p(ey, tuple(q.evidence.items()))}."
        if t == "correlation":
            return f"Compute {n.p(ey, ex)} - {n.p(ey, exp_)}."
        if t == "explaining_away":
            ea, eb, ec = ((r["A"], s["a"]),), ((r["B"], s["b"]),), ((r["C"], s["c"]),)
            return f"Compute {n.p(ea, ec + eb)} - {n.p(ea, ec)}."
        if t == "independence":
            zs = ", ".join(n.v(z) for z in q.given)
            return f"Is {n.v(X)} independent of {n.v(Y)} given {{{zs}}} in this model? Answer yes or no."
        if t == "interventional":
            return f"Compute {n.p(ey, do=ex)}."
        if t == "ate":
            return f"Compute the average treatment effect {n.p(ey, do=ex)} - {n.p(ey, do=exp_)}."
        if t == "cate":
            ez = ((r["Z"], s["z"]),)
            return (
                f"Compute the {n.e(r['Z'], s['z'])}-specific effect {n.p(ey, ez, ex)} - {n.p(ey, ez, exp_)}."
            )
        if t == "backdoor_set":
            return (
                f"Give a smallest set of observed variables that satisfies the backdoor criterion for the "
                f"effect of {n.v(X)} on {n.v(Y)} (answer {{}} if none is needed)."
            )
        if t == "collider_bias":
            ec = ((r["C"], s["c"]),)
            strat = sol.extra["stratum_association"]
            return (
                f"In the stratum {n.e(r['C'], s['c'])}, {n.p(ey, ex + ec)} - {n.p(ey, exp_ + ec)} = "
                f"{strat:.4f}. Compute the average causal effect {n.p(ey, do=ex)} - {n.p(ey, do=exp_)}."
            )
        if t == "cde":
            em = ((r["M"], s["m"]),)
            return f"Compute the controlled direct effect {n.p(ey, do=ex + em)} - {n.p(ey, do=exp_ + em)}."
        if t == "simpson":
            return (
                f"Which intervention makes {n.e(Y, s['y'])} more likely: do({n.e(X, s['x'])}) or "
                f"do({n.e(X, xps)})? Answer with the intervention."
            )
        if t == "counterfactual":
            given = ((X, s["x"]),) + tuple(q.evidence.items())
            return f"Compute the counterfactual probability {n.cf(Y, s['y'], exp_, given)}."
        if t == "ett":
            ett_ = f"{n.cf(Y, s['y'], ex, ex)} - {n.cf(Y, s['y'], exp_, ex)}"
            return f"Compute the effect of treatment on the treated {ett_}."
        if t == "nde":
            M = r["M"]
            return (
                f"Compute the natural direct effect {n.nested(Y, s['y'], X, s['x'], M, xps)} - "
                f"{n.cf(Y, s['y'], exp_)}."
            )
        if t == "nie":
            M = r["M"]
            return (
                f"Compute the natural indirect effect {n.nested(Y, s['y'], X, xps, M, s['x'])} - "
                f"{n.cf(Y, s['y'], exp_)}."
            )
        if t == "pn":
            return (
                f"Compute the probability of necessity {n.cf(Y, s['y'], exp_, ex + ey, op='!=')} "
                f"(counterfactuals of the canonical SCM: each variable is the inverse CDF of its row at an "
                f"independent uniform noise)."
            )
        if t == "ps":
            return (
                f"Compute the probability of sufficiency P({n.v(Y)}_{{{n.e(X, s['x'])}}}={n.s(Y, s['y'])} | "
                f"{n.e(X, xps)}, {n.e(Y, s['y'], '!=')}) (counterfactuals of the canonical SCM: each "
                f"variable is the inverse CDF of its row at an independent uniform noise)."
            )
        raise ValueError(f"unknown query type {t!r}.")

    def _q_narrative(self, sol: Solution, n: Notation) -> str:
        g = self.glossary
        q = sol.query
        t, r, s = q.type, q.roles, q.states
        xps = s.get("x'")
        X, Y = r.get("X"), r.get("Y")
        cx = g.clause(X, s["x"]) if X and "x" in s else ""
        cxp = g.clause(X, xps) if X and xps is not None else ""
        cy = g.clause(Y, s["y"]) if Y and "y" in s else ""
        diff = "Give the difference of the two probabilities (it may be negative)."
        if t == "marginal":
            return f"What is the probability that {cy}?"
        if t == "conditional":
            cond = _join([g.clause(v, st) for v, st in q.evidence.items()])
            return f"Among {g.plural} for whom {cond}, what is the probability that {cy}?"
        if t == "correlation":
            return (
                f"How much more likely is it that {cy} among {g.plural} for whom {cx} than among {g.plural} "
                f"for whom {cxp}? {diff}"
            )
        if t == "explaining_away":
            ca, cb, cc = g.clause(r["A"], s["a"]), g.clause(r["B"], s["b"]), g.clause(r["C"], s["c"])
            return (
                f"Among {g.plural} for whom {cc}, how much does also learning that {cb} change the chance "
                f"that {ca}? Give the probability after minus before."
            )
        if t == "independence":
            zs = _join([g.noun(z) for z in q.given])
            return (
                f"Once {zs} {'is' if len(q.given) == 1 else 'are'} known, does {g.noun(X)} still carry "
                f"information about {g.noun(Y)}? Answer 'yes' if they are independent given "
                f"{zs}, 'no' otherwise."
            )
        if t == "interventional":
            return f"If we made sure that {cx} for every {g.unit}, what would the probability be that {cy}?"
        if t == "ate":
            return (
                f"Compare making sure that {cx} for every {g.unit} with making sure that {cxp} for every "
                f"{g.unit}. How much higher would the probability be that {cy} in the first case? {diff}"
            )
        if t == "cate":
            cz = g.clause(r["Z"], s["z"])
            return (
                f"Consider only {g.plural} for whom {cz}. How much higher would the probability be that {cy} "
                f"if we made sure that {cx} than if we made sure that {cxp}? {diff}"
            )
        if t == "backdoor_set":
            return (
                f"From records of {g.plural} (without any experiment), we want the effect of {g.noun(X)} on "
                f"{g.noun(Y)}. Which factors, as few as possible, must we account for to remove every "
                f"spurious association? Answer with the list of factors, or 'none'."
            )
        if t == "collider_bias":
            cc = g.clause(r["C"], s["c"])
            strat = sol.extra["stratum_association"]
            return (
                f"A study looked only at {g.plural} for whom {cc}. There, the probability that {cy} was "
                f"{strat * 100:.2f} percentage points higher when {cx} than when {cxp}. For the whole "
                f"population, how much higher would the probability be that {cy} if we made sure that {cx} "
                f"than if we made sure that {cxp}? {diff}"
            )
        if t == "cde":
            cm = g.clause(r["M"], s["m"])
            return (
                f"Suppose we made sure that {cm} for every {g.unit}. On top of that, how much higher would "
                f"the probability be that {cy} if we also made sure that {cx} rather than that {cxp}? {diff}"
            )
        if t == "simpson":
            return (
                f"To make it as likely as possible that {cy}, should we make sure that {cx}, or that {cxp}, "
                f"for every {g.unit}? Answer with the better option."
            )
        if t == "counterfactual":
            seen = _join([cx] + [g.clause(v, st) for v, st in q.evidence.items() if v != X])
            return (
                f"We observed a {g.unit} for whom {seen}. Imagine the same {g.unit} in the alternative where "
                f"{cxp}, with its own randomness unchanged. What is the probability that {cy} in that "
                f"alternative?"
            )
        if t == "ett":
            return (
                f"Consider the {g.plural} for whom {cx}. For them, how much higher is the probability that "
                f"{cy} than in the alternative where, for these same {g.plural}, {cxp}? {diff}"
            )
        if t == "nde":
            m = g.noun(r["M"])
            return (
                f"Suppose we made sure that {cx} for every {g.unit}, while {m} stayed at whatever it would "
                f"have been in the alternative where {cxp}. How much higher would the chance be that {cy} "
                f"than if we simply made sure that {cxp}? {diff}"
            )
        if t == "nie":
            m = g.noun(r["M"])
            return (
                f"Suppose we made sure that {cxp} for every {g.unit}, while {m} took whatever value it would "
                f"have had in the alternative where {cx}. How much higher would the probability be that {cy} "
                f"than if we simply made sure that {cxp}? {diff}"
            )
        if t == "pn":
            return (
                f"Consider the {g.plural} for whom {cx} and {cy}. What is the probability that, in the "
                f"alternative where {cxp}, it would no longer be the case that {cy}? (Each factor keeps its "
                f"own randomness in the alternative.)"
            )
        if t == "ps":
            return (
                f"Consider the {g.plural} for whom {cxp} and it is not the case that {cy}. What is the "
                f"probability that {cy} in the alternative where {cx}? (Each factor keeps its own randomness "
                f"in the alternative.)"
            )
        raise ValueError(f"unknown query type {t!r}.")

    def _q_code(self, sol: Solution, n: Notation) -> str:
        q = sol.query
        t, r, s = q.type, q.roles, q.states
        xps = s.get("x'")
        X, Y = r.get("X"), r.get("Y")
        u = "Let u map every name to an independent Uniform(0, 1) draw."
        same = "with the same u"
        fx = f"{{{X!r}: {s.get('x')!r}}}" if X else ""
        fxp = f"{{{X!r}: {xps!r}}}" if X else ""
        yev = f"[{Y!r}] == {s.get('y')!r}" if Y else ""
        diff = "Give the difference (it may be negative)."

        def conds(pairs) -> str:
            return " and ".join(f"v[{v!r}] == {st!r}" for v, st in pairs)

        if t == "marginal":
            return f"{u} What is the probability that run(u){yev}?"
        if t == "conditional":
            given = conds(q.evidence.items())
            return f"{u} With v = run(u), what is the probability that v{yev} given that {given}?"
        if t == "correlation":
            return (
                f"{u} With v = run(u), what is P(v{yev} | v[{X!r}] == {s['x']!r}) - "
                f"P(v{yev} | v[{X!r}] == {xps!r})? {diff}"
            )
        if t == "explaining_away":
            A, B, C = r["A"], r["B"], r["C"]
            both, one = conds([(C, s["c"]), (B, s["b"])]), conds([(C, s["c"])])
            return (
                f"{u} With v = run(u), what is P(v[{A!r}] == {s['a']!r} | {both}) - "
                f"P(v[{A!r}] == {s['a']!r} | {one})? {diff}"
            )
        if t == "independence":
            zs = ", ".join(f"v[{z!r}]" for z in q.given)
            return (
                f"{u} With v = run(u), is v[{X!r}] independent of v[{Y!r}] conditionally on {zs}, for every "
                f"choice of the numbers in the tables above? Answer yes or no."
            )
        if t == "interventional":
            return f"{u} What is the probability that run(u, force={fx}){yev}?"
        if t == "ate":
            return f"{u} What is P(run(u, force={fx}){yev}) - P(run(u, force={fxp}){yev})? {diff}"
        if t == "cate":
            Z = r["Z"]
            return (
                f"{u} Let w1 = run(u, force={fx}) and w0 = run(u, force={fxp}). What is "
                f"P(w1{yev} | w1[{Z!r}] == {s['z']!r}) - P(w0{yev} | w0[{Z!r}] == {s['z']!r})? {diff}"
            )
        if t == "backdoor_set":
            return (
                f"{u} With v = run(u), give a shortest list S of names (not {X!r} or {Y!r}) such that for "
                f"every "
                f"choice of the numbers in the tables, sum over values s of S of P(v[{Y!r}] == y | "
                f"v[{X!r}] == x, v[S] == s) * P(v[S] == s) equals P(run(u, force={{{X!r}: x}})[{Y!r}] == y) "
                f"for all x, y. Answer with a Python list ([] if none is needed)."
            )
        if t == "collider_bias":
            C = r["C"]
            strat = sol.extra["stratum_association"]
            return (
                f"{u} With v = run(u), P(v{yev} | v[{X!r}] == {s['x']!r} and v[{C!r}] == {s['c']!r}) - "
                f"P(v{yev} | v[{X!r}] == {xps!r} and v[{C!r}] == {s['c']!r}) = {strat:.4f}. What is "
                f"P(run(u, force={fx}){yev}) - P(run(u, force={fxp}){yev})? {diff}"
            )
        if t == "cde":
            M = r["M"]
            f1 = f"{{{X!r}: {s['x']!r}, {M!r}: {s['m']!r}}}"
            f0 = f"{{{X!r}: {xps!r}, {M!r}: {s['m']!r}}}"
            return f"{u} What is P(run(u, force={f1}){yev}) - P(run(u, force={f0}){yev})? {diff}"
        if t == "simpson":
            return (
                f"{u} Which value f, {s['x']!r} or {xps!r}, makes P(run(u, force={{{X!r}: f}}){yev}) "
                f"larger? Answer with the value."
            )
        if t == "counterfactual":
            seen = conds([(X, s["x"])] + [(v, st) for v, st in q.evidence.items() if v != X])
            return (
                f"{u} A run v = run(u) gave {seen}. {_cap(same)}, what is the probability that "
                f"run(u, force={fxp}){yev}?"
            )
        if t == "ett":
            return (
                f"{u} Given that v = run(u) has v[{X!r}] == {s['x']!r}, what is P(run(u, force={fx}){yev}) - "
                f"P(run(u, force={fxp}){yev}), both {same}? {diff}"
            )
        if t == "nde":
            M = r["M"]
            return (
                f"{u} Let w0 = run(u, force={fxp}) and w1 = run(u, force={{{X!r}: {s['x']!r}, {M!r}: "
                f"w0[{M!r}]}}), {same}. What is P(w1{yev}) - P(w0{yev})? {diff}"
            )
        if t == "nie":
            M = r["M"]
            return (
                f"{u} Let w0 = run(u, force={fxp}), w1 = run(u, force={fx}) and w = run(u, force={{{X!r}: "
                f"{xps!r}, {M!r}: w1[{M!r}]}}), all {same}. What is P(w{yev}) - P(w0{yev})? {diff}"
            )
        if t == "pn":
            return (
                f"{u} A run v = run(u) gave {conds([(X, s['x']), (Y, s['y'])])}. {_cap(same)}, what is the "
                f"probability that run(u, force={fxp})[{Y!r}] != {s['y']!r}?"
            )
        if t == "ps":
            return (
                f"{u} A run v = run(u) gave v[{X!r}] == {xps!r} and v[{Y!r}] != {s['y']!r}. "
                f"{_cap(same)}, what is the probability that run(u, force={fx}){yev}?"
            )
        raise ValueError(f"unknown query type {t!r}.")
