"""End-to-end generation: planted structures, shortcut filters, schema, renderings, executable code form."""

from __future__ import annotations

import re

import numpy as np
import pytest

from causal_ext.unico import (
    QUERY_TYPES,
    RECORD_SCHEMA,
    DiscreteBN,
    Source,
    UniCoGenerator,
    firing_squad,
    kidney_stones,
    random_network,
    read_jsonl,
    sample_query,
    validate_record,
)
from causal_ext.unico.queries import evaluate_terms


@pytest.fixture(scope="module")
def generated():
    sources = [
        Source(random_network(np.random.default_rng(s), 6, name=f"random-{s}"), "random", s) for s in range(8)
    ]
    sources += [Source(kidney_stones(), "example"), Source(firing_squad(0.4, 0.3), "example")]
    return UniCoGenerator(candidates_per_type=3, seed=1).fit(sources)


def test_all_18_types_generated_records_valid_and_stats_consistent(generated, tmp_path):
    gen = generated
    assert len(QUERY_TYPES) == 18
    assert [sum(q.rung == r for q in QUERY_TYPES.values()) for r in (1, 2, 3)] == [5, 7, 6]
    kept_types = {rec["query_type"] for rec in gen.records_}
    assert kept_types == set(QUERY_TYPES)  # every type survives the filters somewhere
    for rec in gen.records_:
        validate_record(rec)
    st = gen.stats_
    assert st["items"] == len(gen.items_) and st["records"] == 3 * st["items"]
    assert st["per_rendering"] == {"symbolic": st["items"], "narrative": st["items"], "code": st["items"]}
    assert sum(s["kept"] for s in st["per_type"].values()) == st["items"]
    for s in st["per_type"].values():
        assert s["kept"] + s["dropped"] == s["candidates"]
        assert sum(s["by_rule"].values()) >= s["dropped"]
    assert sum(r["kept"] for r in st["per_rung"].values()) == st["items"]
    assert len(gen.drops_) == sum(s["dropped"] for s in st["per_type"].values())
    for _src, bn, sol in gen.items_:  # rung-1/2 numbers are exactly their recorded linear combinations
        if sol.terms is not None:
            assert evaluate_terms(bn, sol.terms) == pytest.approx(sol.answer, abs=1e-12)
    path = gen.write_jsonl(tmp_path / "unico.jsonl")
    back = read_jsonl(path)
    assert back == gen.records_
    assert set(RECORD_SCHEMA["required"]) <= set(back[0])


def test_same_seed_same_records():
    src = [Source(random_network(np.random.default_rng(5), 5), "random", 5)]
    a = UniCoGenerator(candidates_per_type=2, seed=9).fit(src).records_
    b = UniCoGenerator(candidates_per_type=2, seed=9).fit(src).records_
    assert a == b and a


def test_shortcut_filter_drops_unconfounded_interventions():
    """In X -> Y with X a root, P(y | do(x)) = P(y | x): every rung-2 candidate collapses to rung 1."""
    bn = DiscreteBN(
        {"x": ("0", "1"), "y": ("0", "1")},
        {"y": ("x",)},
        {"x": np.array([0.3, 0.7]), "y": np.array([[0.9, 0.1], [0.2, 0.8]])},
    )
    gen = UniCoGenerator(query_types=["interventional", "ate", "ett"], candidates_per_type=4).fit([bn])
    assert gen.stats_["items"] == 0
    per = gen.stats_["per_type"]
    assert per["interventional"]["by_rule"]["rung_collapse"] == per["interventional"]["candidates"] > 0
    assert per["ate"]["by_rule"]["rung_collapse"] == per["ate"]["candidates"] > 0
    assert per["ett"]["by_rule"]["ate_heuristic"] == per["ett"]["candidates"] > 0
    assert per["ate"]["drop_rate"] == 1.0


def test_kidney_stone_simpson_item_favours_treatment_a():
    gen = UniCoGenerator(query_types=["simpson", "ate"], candidates_per_type=4, decimals=None, seed=0)
    gen.fit([Source(kidney_stones(), "example")])
    simpson = [
        rec for rec in gen.records_ if rec["query_type"] == "simpson" and rec["rendering"] == "symbolic"
    ]
    assert simpson, "the kidney-stone reversal must survive the no_reversal filter"
    for rec in simpson:
        q = rec["query"]
        assert q["roles"] == {"X": "treatment", "Y": "recovery"}
        assert rec["answer"] == ("A" if q["states"]["y"] == "yes" else "B")
        assert rec["shortcut_checks"]["no_reversal"]["value"] != rec["answer"]  # the aggregate picks wrongly
    for rec in gen.records_:
        if rec["query_type"] == "ate" and rec["query"]["states"] == {"x": "A", "x'": "B", "y": "yes"}:
            assert rec["answer"] == pytest.approx(0.8325462 - 0.778875, abs=1e-6)


def _mc(run, draws, names, rec, rng) -> float:
    """Monte Carlo estimate, by executing the rendered program, of the quantity a record asks for."""
    q = rec["query"]
    r, s, ev = q["roles"], q["states"], q["evidence"]
    X, Y = r.get("X"), r.get("Y")
    hits = total = 0
    for _ in range(draws):
        u = {n: rng.random() for n in names}
        v = run(u)
        t = rec["query_type"]
        if t == "marginal":
            total, hits = total + 1, hits + (v[Y] == s["y"])
        elif t == "interventional":
            total, hits = total + 1, hits + (run(u, {X: s["x"]})[Y] == s["y"])
        elif t == "counterfactual":
            if v[X] == s["x"] and all(v[k] == val for k, val in ev.items()):
                total, hits = total + 1, hits + (run(u, {X: s["x'"]})[Y] == s["y"])
        elif t == "nde":
            w0 = run(u, {X: s["x'"]})
            w1 = run(u, {X: s["x"], r["M"]: w0[r["M"]]})
            total, hits = total + 1, hits + (w1[Y] == s["y"]) - (w0[Y] == s["y"])
        elif t == "pn":
            if v[X] == s["x"] and v[Y] == s["y"]:
                total, hits = total + 1, hits + (run(u, {X: s["x'"]})[Y] != s["y"])
    return hits / max(total, 1)


def test_code_rendering_executes_as_the_mechanism(generated):
    """exec() the code context; simulating it reproduces the exact answers (the program is the SCM)."""
    rng = np.random.default_rng(0)
    done: dict[str, int] = {}
    for rec in generated.records_:
        if rec["rendering"] != "code":
            continue
        namespace: dict = {}
        exec(compile(rec["context"], "<unico>", "exec"), namespace)  # every program is valid Python
        t = rec["query_type"]
        if t not in ("marginal", "interventional", "counterfactual", "nde", "pn") or done.get(t, 0) >= 2:
            continue
        if t in ("counterfactual", "pn") and rec["source"]["kind"] != "random":
            continue
        names = re.findall(r"^    v\['(\w+)'\] =", rec["context"], flags=re.M)
        est = _mc(namespace["run"], 6000, names, rec, rng)
        assert est == pytest.approx(rec["answer"], abs=0.06), (t, rec["id"])
        done[t] = done.get(t, 0) + 1
    assert set(done) == {"marginal", "interventional", "counterfactual", "nde", "pn"}


def test_renderings_differ_in_the_expected_ways(generated):
    by_item: dict[str, dict[str, dict]] = {}
    for rec in generated.records_:
        by_item.setdefault(rec["item_id"], {})[rec["rendering"]] = rec
    jargon = re.compile(r"do\(|intervention|counterfactual|backdoor|_\{", re.I)
    for recs in by_item.values():
        sym, nar, code = recs["symbolic"], recs["narrative"], recs["code"]
        assert sym["answer"] == nar["answer"] == code["answer"]
        assert "Causal graph:" in sym["context"] and "def run(u, force=None):" in code["context"]
        assert not jargon.search(nar["question"]), nar["question"]
        assert nar["messages"][0]["content"].endswith(nar["question"])
        assert nar["rationale"].endswith("Answer: " + nar["answer_text"])
        names = re.findall(r"(\w+)!?=", sym["question"] + sym["context"])
        assert names and all(re.fullmatch(r"[A-Z]|V\d+|\d+", n) for n in names), names  # letters, indices


def test_bad_settings_and_sources():
    with pytest.raises(ValueError, match="query_types: unknown"):
        UniCoGenerator(query_types=["nope"]).fit([])
    with pytest.raises(ValueError, match="renderings"):
        UniCoGenerator(renderings=["latex"]).fit([])
    with pytest.raises(ValueError, match="tolerance"):
        UniCoGenerator(tolerance=2).fit([])
    with pytest.raises(ValueError, match="kind"):
        Source(kidney_stones(), "web")
    with pytest.raises(TypeError, match="DiscreteBN"):
        Source("asia")
    with pytest.raises(ValueError, match="call fit"):
        UniCoGenerator().write_jsonl("x.jsonl")
    rec = dict(generated_record := _one_record())
    rec["rung"] = 3 if rec["rung"] != 3 else 1
    with pytest.raises(ValueError, match="rung"):
        validate_record(rec)
    rec = dict(generated_record)
    rec["surprise"] = 1
    with pytest.raises(ValueError, match="unexpected key 'surprise'"):
        validate_record(rec)
    rec = dict(generated_record)
    rec["shortcut_checks"] = {"rung_collapse": {"value": 0.1, "fired": True}}
    with pytest.raises(ValueError, match="should have been dropped"):
        validate_record(rec)


def _one_record() -> dict:
    gen = UniCoGenerator(query_types=["marginal"], candidates_per_type=2, seed=2)
    return gen.fit([Source(random_network(np.random.default_rng(2), 4), "random", 2)]).records_[0]


def test_code_rendering_survives_awkward_names():
    """Variable names that are not identifiers (or collide once sanitised) still give a valid program."""
    bn = DiscreteBN(
        {"a-b": ("lo w", "hi'gh"), "a_b": ("0", "1")},
        {"a_b": ("a-b",)},
        {"a-b": np.array([0.25, 0.75]), "a_b": np.array([[0.9, 0.1], [0.3, 0.7]])},
    )
    gen = UniCoGenerator(
        query_types=["marginal", "interventional"], renderings=["code"], candidates_per_type=4
    )
    recs = gen.fit([bn]).records_
    assert recs
    for rec in recs:
        ns: dict = {}
        exec(compile(rec["context"], "<unico>", "exec"), ns)
        out = ns["run"]({"a-b": 0.5, "a_b": 0.5})
        assert out["a-b"] == "hi'gh" and out["a_b"] == "1"  # u=0.5 > 0.25 -> 2nd state; 0.5 >= 0.3 -> '1'
    with pytest.raises(ValueError, match="unknown query type"):
        sample_query(bn, "nope", np.random.default_rng(0))


def test_fallback_yields_types_whose_every_context_is_large():
    """On alarm controlled-direct-effect candidates need dozens of CPT rows (most ~144): below that
    limit the type yields nothing without the fallback; with it, items within the fallback's limit."""
    from causal_ext.unico.networks import installed_pgmpy_networks, load_bnlearn

    alarm = Source(load_bnlearn(installed_pgmpy_networks()["alarm"]), "bnlearn")
    kw = {"query_types": ["cde"], "renderings": ("symbolic",), "max_context_rows": 10}
    off = UniCoGenerator(**kw, fallback_context_rows=None).fit([alarm])
    on = UniCoGenerator(**kw).fit([alarm])
    assert off.stats_["per_type"]["cde"]["kept"] == 0 and off.stats_["per_type"]["cde"]["too_large"] > 0
    assert on.stats_["per_type"]["cde"]["kept"] >= 1 and on.stats_["per_type"]["cde"]["fallback"] >= 1
    for _src, bn, sol in on.items_:
        sub = bn.subnetwork(sol.query.variables())
        assert sum(int(np.prod(t.shape[:-1])) for t in sub.cpts.values()) <= 400
