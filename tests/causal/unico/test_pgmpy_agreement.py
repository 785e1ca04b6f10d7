"""UniCo's exact answers agree with pgmpy on the bnlearn networks asia, sachs and child.

The BIF files are taken from the installed pgmpy package (the very files of the pinned wheel: their
sha256 is checked against :data:`causal_ext.unico.networks.BNLEARN_NETWORKS`), pass through the
real prepare/load path with a fake fetch (no download), and are parsed by UniCo's own reader.
pgmpy answers rung 1 with ``VariableElimination`` and rung 2 by graph surgery on a copy of its own
model (edges into the intervened variables removed, point-mass CPDs) followed by
``VariableElimination``; single-variable ``do`` without evidence is also checked against
``CausalInference.query(do=...)`` (backdoor adjustment over the parents). pgmpy 1.1.2's
``CausalInference.query`` is not used for several ``do`` variables or with evidence: it adjusts for the
parents of all ``do`` variables, so a ``do`` variable that is a parent of another is averaged over,
and it drops the evidence from the inner query.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

import numpy as np
import pgmpy  # a declared dev dependency (pinned): a missing pgmpy fails the suite instead of skipping
import pytest

from causal_ext.unico import (
    BNLEARN_NETWORKS,
    QUERY_TYPES,
    Source,
    UniCoGenerator,
    d_separated,
    load_bnlearn,
    prepare_bnlearn,
    probability,
)

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # pgmpy's own deprecation notices
with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    from pgmpy.factors.discrete import TabularCPD
    from pgmpy.inference import CausalInference, VariableElimination
    from pgmpy.readwrite import BIFReader

NETWORKS = ("asia", "sachs", "child")
RUNG12_WITH_TERMS = [t for t, q in QUERY_TYPES.items() if q.rung in (1, 2) and q.answer_type != "boolean"]


def _wheel_file(name: str) -> bytes:
    path = Path(pgmpy.__file__).parent / "utils" / "example_models" / f"{name}.bif.gz"
    assert path.is_file(), f"the installed pgmpy has no {path.name}; install the pinned pgmpy (pyproject dev)"
    blob = path.read_bytes()
    assert hashlib.sha256(blob).hexdigest() == BNLEARN_NETWORKS[name], (
        f"the installed pgmpy ships a different {path.name} than the pinned wheel; install the pinned pgmpy")
    return blob


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    """name -> (UniCo network loaded through prepare/load, pgmpy model, VE, CausalInference)."""
    root = tmp_path_factory.mktemp("data")
    blobs = {n: _wheel_file(n) for n in NETWORKS}

    def fetch(source, name, log):
        assert source["requirement"].startswith("pgmpy==")
        return {f: blobs[f.split(".")[0]] for f in source["members"]}

    prepare_bnlearn(list(NETWORKS), root, fetch=fetch, verbose=False)
    out = {}
    for n in NETWORKS:
        import gzip

        model = BIFReader(string=gzip.decompress(blobs[n]).decode()).get_model()
        out[n] = (load_bnlearn(n, root), model, VariableElimination(model), CausalInference(model))
    return out


def _pg(ve_or_ci, var: str, state: str, evidence=None, do=None) -> float:
    kw = {"evidence": evidence or None, "show_progress": False}
    if do:
        kw["do"] = do
    f = ve_or_ci.query(variables=[var], **kw)
    return float(f.get_value(**{var: state}))


def _pg_surgery(model, var: str, state: str, evidence=None, do=None) -> float:
    """P(var=state | evidence) in pgmpy's own mutilated copy of the model (graph surgery for ``do``)."""
    m = model.copy()
    for v, s in (do or {}).items():
        for p in list(m.get_parents(v)):
            m.remove_edge(p, v)
        states = list(model.get_cpds(v).state_names[v])
        m.remove_cpds(m.get_cpds(v))
        m.add_cpds(TabularCPD(v, len(states), [[float(t == s)] for t in states], state_names={v: states}))
    return _pg(VariableElimination(m), var, state, evidence)


@pytest.mark.parametrize("name", NETWORKS)
def test_cpts_match_pgmpy(nets, name):
    bn, model, _, _ = nets[name]
    assert set(bn.variables) == set(model.nodes())
    for cpd in model.get_cpds():
        v, ev = cpd.variable, list(cpd.variables[1:])
        assert tuple(ev) == bn.parents[v]
        arr = np.moveaxis(cpd.values, 0, -1)
        for i, p in enumerate(ev):
            arr = np.take(arr, [cpd.state_names[p].index(s) for s in bn.states[p]], axis=i)
        arr = arr[..., [cpd.state_names[v].index(s) for s in bn.states[v]]]
        np.testing.assert_allclose(bn.cpts[v], arr, atol=1e-6)


@pytest.mark.parametrize("name", NETWORKS)
def test_rung1_and_rung2_queries_match_pgmpy(nets, name):
    bn, model, ve, ci = nets[name]
    rng = np.random.default_rng(7)
    names = bn.variables
    for _ in range(6):
        y, e1, e2 = (str(v) for v in rng.choice(names, size=3, replace=False))
        row = bn.sample(1, rng)
        ev = {e1: bn.states[e1][int(row[e1][0])], e2: bn.states[e2][int(row[e2][0])]}
        ys = bn.states[y][int(rng.integers(bn.card(y)))]
        assert probability(bn, {y: ys}) == pytest.approx(_pg(ve, y, ys), abs=1e-6)
        assert probability(bn, {y: ys}, ev) == pytest.approx(_pg(ve, y, ys, ev), abs=1e-6)
    # do-queries for causal pairs (X an ancestor of Y), sometimes with a pre-treatment covariate
    pairs = [(x, y) for x in names for y in names if x != y and y in bn.descendants([x])]
    for k in rng.choice(len(pairs), size=5, replace=False):
        x, y = pairs[int(k)]
        xs = bn.states[x][int(rng.integers(bn.card(x)))]
        ys = bn.states[y][int(rng.integers(bn.card(y)))]
        mine = probability(bn, {y: ys}, do={x: xs})
        assert mine == pytest.approx(_pg(ci, y, ys, do={x: xs}), abs=1e-6)  # adjustment route
        assert mine == pytest.approx(_pg_surgery(model, y, ys, do={x: xs}), abs=1e-6)  # surgery route
        z = str(rng.choice(sorted(set(names) - bn.descendants([x]))))
        zs = bn.states[z][int(bn.sample(1, rng)[z][0])]
        assert probability(bn, {y: ys}, {z: zs}, {x: xs}) == pytest.approx(
            _pg_surgery(model, y, ys, {z: zs}, {x: xs}), abs=1e-6
        )


@pytest.mark.parametrize("name", NETWORKS)
def test_generated_rung12_answers_match_pgmpy(nets, name):
    """Every generated rung-1/2 number, rebuilt from its recorded terms by pgmpy, equals UniCo's answer."""
    bn, model, ve, ci = nets[name]
    gen = UniCoGenerator(
        query_types=RUNG12_WITH_TERMS + ["independence", "backdoor_set"],
        renderings=["symbolic"],
        candidates_per_type=2,
        decimals=None,
        seed=3,
        tolerance=0.0,
    )
    gen.fit([Source(bn, "bnlearn")])
    checked = 0
    for rec in gen.records_:
        if rec["terms"] is not None:
            total = 0.0
            for t in rec["terms"]:
                ((var, state),) = t["event"].items()
                if t["do"]:
                    total += t["coef"] * _pg_surgery(model, var, state, t["evidence"], t["do"])
                else:
                    total += t["coef"] * _pg(ve, var, state, t["evidence"])
            assert rec["answer"] == pytest.approx(total, abs=1e-6), rec["id"]
            checked += 1
        elif rec["query_type"] == "independence":
            r, given = rec["query"]["roles"], rec["query"]["given"]
            assert rec["answer"] == (not model.is_dconnected(r["X"], r["Y"], observed=given))
            checked += 1
        elif rec["query_type"] == "backdoor_set":
            r = rec["query"]["roles"]
            for s in rec["accepted_answers"]:
                assert ci.is_valid_backdoor_adjustment_set(r["X"], r["Y"], Z=s)
            checked += 1
    assert checked >= 10


@pytest.mark.parametrize("name", NETWORKS)
def test_d_separation_matches_pgmpy(nets, name):
    bn, model, _, _ = nets[name]
    rng = np.random.default_rng(11)
    for _ in range(30):
        x, y, *zs = (str(v) for v in rng.choice(bn.variables, size=2 + int(rng.integers(3)), replace=False))
        assert d_separated(bn.parents, [x], [y], zs) == (not model.is_dconnected(x, y, observed=zs))
