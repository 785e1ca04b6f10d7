"""The signed benchmark's aggregation: seed means, the Popularity floor flag and Kendall's tau."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.ml100k_signed import kendall_taus, load_runs, markdown, summarise, tau_subsets


def _run(row: str, seed: int, ndcg: float, signed: float, probe: bool = True) -> dict:
    test = {"recall@10": ndcg * 2, "ndcg@10": ndcg, "signed_recall@10": signed * 2, "signed_hr@10": 0.3,
            "signed_ndcg@10": signed, "disliked_hits@10": 0.4}
    return {"row": row, "seed": seed, "test": test, "train_seconds": 10.0, "epochs": 5,
            "probe": {"probe_auroc": 0.8, "score_auroc": 0.6} if probe else None}


def _write(folder: Path, runs: list[dict]) -> None:
    folder.mkdir()
    for r in runs:
        (folder / f"{r['row'].replace(' ', '_')}__seed{r['seed']}.json").write_text(json.dumps(r))


def test_summary_table_and_taus(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    _write(folder, [_run("Popularity", 0, 0.08, 0.066, probe=False), _run("BPR-MF", 0, 0.11, 0.09),
                    _run("BPR-MF", 1, 0.13, 0.11), _run("SASRec", 0, 0.13, 0.06),
                    _run("SiReN", 0, 0.05, 0.05)])
    summary = summarise(load_runs(folder))
    assert list(summary) == ["Popularity", "BPR-MF", "SASRec", "SiReN"]  # the benchmark's row order
    assert summary["BPR-MF"]["ndcg@10"][0] == pytest.approx(0.12)
    assert summary["BPR-MF"]["seeds"] == [0, 1]
    assert "probe_auroc" not in summary["Popularity"]
    taus = kendall_taus(summary)
    # conventional order SASRec > BPR-MF > Pop > SiReN; signed order BPR-MF > Pop > SASRec > SiReN
    assert taus["ndcg@10 vs signed_ndcg@10"]["tau"] == pytest.approx(1 / 3)
    # without SASRec the two orders agree: BPR-MF > Pop > SiReN under both
    assert taus["ndcg@10 vs signed_ndcg@10 | without SASRec"]["tau"] == pytest.approx(1.0)
    assert taus["ndcg@10 vs signed_ndcg@10 | without SASRec"]["n_rows"] == 3
    md = markdown(summary, taus)
    assert "| ndcg@10 vs signed_ndcg@10 | without SASRec | 1.000 | " in md
    assert "| ndcg@10 vs signed_ndcg@10 | all rows | 0.333 | " in md
    assert "| SiReN | 1 |" in md and "0.62 (below Popularity)" in md
    assert "0.1200 ± 0.0141" in md  # mean ± std over two seeds


def test_tau_subsets_separate_families_and_addon_variants() -> None:
    rows = ["Popularity", "BPR-MF", "BPR-MF + ValenceMargin", "SASRec", "SASRec + ValenceMargin"]
    subsets = tau_subsets(rows)
    assert subsets["all rows"] == rows
    assert subsets["distinct models"] == ["Popularity", "BPR-MF", "SASRec"]
    assert subsets["without SASRec"] == ["Popularity", "BPR-MF", "BPR-MF + ValenceMargin"]
    assert set(subsets) == {"all rows", "distinct models", "without Popularity", "without BPR-MF",
                            "without SASRec"}


def test_valence_margin_gain_is_paired_per_user_over_seeds() -> None:
    """Each user's value is averaged over a row's seeds, then differenced on the users both rows share; a
    constant per-user shift is significant, a zero one is "no significant difference"."""
    from benchmarks.ml100k_signed import PAIRED_METRICS, paired_addon_gains, paired_markdown

    def run(row: str, seed: int, shift: float) -> dict:
        values = {m: {str(u): u / 100 + shift for u in range(1, 41)} for m in PAIRED_METRICS}
        values["disliked_hits@10"] = {str(u): 0.5 for u in range(1, 41)}  # equal: no difference
        return {**_run(row, seed, 0.1, 0.1), "per_user": values}

    runs = {"BPR-MF": [run("BPR-MF", 0, 0.0), run("BPR-MF", 1, 0.2)],  # per-user seed mean: u/100 + 0.1
            "BPR-MF + ValenceMargin": [run("BPR-MF + ValenceMargin", 0, 0.3)],
            "SASRec": [run("SASRec", 0, 0.0)]}  # no add-on row: no pair
    del runs["BPR-MF + ValenceMargin"][0]["per_user"]["ndcg@10"]["40"]  # a user missing on one side
    gains = paired_addon_gains(runs)
    assert list(gains) == ["BPR-MF + ValenceMargin"]
    recall = gains["BPR-MF + ValenceMargin"]["recall@10"]
    assert recall["mean"] == pytest.approx(0.2) and recall["significant"] and recall["users"] == 40
    assert gains["BPR-MF + ValenceMargin"]["ndcg@10"]["users"] == 39
    assert not gains["BPR-MF + ValenceMargin"]["disliked_hits@10"]["significant"]
    assert "no significant difference" in paired_markdown(gains)


def test_margin_weight_choice_keeps_recall_and_lowers_disliked_hits() -> None:
    from benchmarks.ml100k_signed import choose_margin_weight, margin_override

    base = {"recall@10": 0.10, "disliked_hits@10": 0.08}
    found = {0.01: {"recall@10": 0.11, "disliked_hits@10": 0.09},  # more disliked hits: not eligible
             0.03: {"recall@10": 0.096, "disliked_hits@10": 0.05},
             0.1: {"recall@10": 0.095, "disliked_hits@10": 0.03},  # exactly 95 %: eligible, largest
             0.3: {"recall@10": 0.094, "disliked_hits@10": 0.02}}  # below 95 %
    assert choose_margin_weight(base, found) == 0.1
    assert choose_margin_weight(base, {0.3: found[0.3]}) is None
    addon = json.loads(margin_override(0.03)[1])[0]
    assert addon["init_args"] == {"weight": 0.03, "margin": 1.0}


def test_margin_search_continues_downward_only_when_no_weight_qualifies(tmp_path: Path, monkeypatch) -> None:
    import benchmarks.ml100k_signed as signed

    monkeypatch.setattr(signed, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(signed, "MARGIN_SEARCH", tmp_path / "search")
    (tmp_path / "runs").mkdir()
    for row in ("BPR-MF", "SASRec"):
        base = {"valid": {"recall@10": 0.10, "disliked_hits@10": 0.08}}
        signed.run_file(row, 0).write_text(json.dumps(base))
    trained: list[tuple[str, float]] = []

    def fake_run_one(row, seed, max_time, extra, name, probe):
        weight = json.loads(extra[1])[0]["init_args"]["weight"]
        trained.append((row, weight))
        # BPR-MF keeps its recall up to 0.1; SASRec loses 10 % even at 0.01 and keeps it only at 0.001
        keeps = weight <= (0.1 if row.startswith("BPR") else 0.001)
        return {"valid": {"recall@10": 0.099 if keeps else 0.05, "disliked_hits@10": 0.05}}

    monkeypatch.setattr(signed, "run_one", fake_run_one)
    rows = ["BPR-MF + ValenceMargin", "SASRec + ValenceMargin"]
    md = signed.margin_search(rows, signed.MARGIN_WEIGHTS, None)
    low = signed.MARGIN_WEIGHTS_LOW
    assert {w for r, w in trained if r.startswith("BPR")} == set(signed.MARGIN_WEIGHTS)
    assert {w for r, w in trained if r.startswith("SASRec")} == set(signed.MARGIN_WEIGHTS + low)
    chosen = [line for line in md.splitlines() if "**chosen**" in line]
    assert [line.split("|")[2].strip() for line in chosen] == ["0.1", "0.001"]
    # a process that may train only part of the grid leaves the row without a choice (and no extension)
    trained.clear()
    for f in (tmp_path / "search").glob("SASRec*w0.3.json"):
        f.unlink()
    md = signed.margin_search(["SASRec + ValenceMargin"], signed.MARGIN_WEIGHTS, None, train=(0.001,))
    assert trained == [] and "**chosen**" not in md
    # a row searched before is read, never trained, by a process searching another row
    for f in (tmp_path / "search").glob("BPR*w0.3.json"):
        f.unlink()
    signed.margin_search(rows, signed.MARGIN_WEIGHTS, None, train_rows={"SASRec + ValenceMargin"})
    assert ("BPR-MF + ValenceMargin", 0.3) not in trained and ("SASRec + ValenceMargin", 0.3) in trained
