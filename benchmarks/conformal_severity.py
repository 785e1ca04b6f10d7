"""Conformal Severity Control: target vs achieved severity over random calibration/test splits.

Run::

    python -m benchmarks.conformal_severity                 # 3 seeds x 200 splits, both tasks
    python -m benchmarks.conformal_severity --splits 20 --seeds 0   # smoke
    python -m benchmarks.conformal_severity --render-only   # table and plot again from the JSON

Tasks (:mod:`calib_ext.conformal.data`): the synthetic EHR medication task (96 ATC substances, an MLP
trained on 4000 visits, a pool of 3000) and ML-100K genre sets (18 genres in a documented 2-level
tree, logistic regression on MiniLM title embeddings + collaborative SVD factors, a pool of 840
items). Each seed regenerates the data / re-splits the items and retrains the predictor.

Each of ``--splits`` random splits halves the pool into calibration and test. At each target alpha:

* **CSC mean**: hierarchical sets, CRC of the average severity (guarantee: E[severity] <= alpha);
* **CRC-sev flat**: the same loss on flat threshold sets (ablation of the set family);
* **CRC-FNR**: the baseline, CRC of the false-negative rate on flat sets, at the same alpha;
* **CRC-FNR size-matched**: flat sets whose mean calibration set size equals CSC's (threshold chosen on
  the calibration half only), so the mismatch distances are compared at equal set size;
* **CSC quantile**: hierarchical sets, Learn-then-Test (binomial p-values, fixed sequence on a
  1001-point grid) with tolerance alpha, beta = 0.1, delta = 0.1 (guarantee: with probability >= 0.9
  over calibration, P(severity > alpha) <= 0.1, i.e. the 90th percentile of severity is <= alpha).

Reported on the test half, averaged over splits and seeds: average severity (and the share of
splits above alpha -- CRC guarantees the *mean over splits*, not every split), false-negative rate,
set size, and the shares of true labels matched exactly, missed closely (normalised distance <= 0.5:
ATC same pharmacological subgroup; genres same group) and missed distantly. For the quantile rows:
the test exceedance rate, the share of splits with exceedance <= beta (target >= 1 - delta, up to the
test half's own sampling noise) and the test 90th-percentile severity. The distant-miss shift is
also given as a paired difference per test instance (CSC minus size-matched CRC-FNR, each instance's
difference averaged over the splits where it was tested, pooled over seeds) with a 95 % bootstrap
interval over instances.

Writes ``benchmarks/results/conformal_severity.{json,md}`` and ``docs/img/conformal_severity.png``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from benchmarks.common import RESULTS, save_figure, write_results
from calib_ext.conformal.data import MultiLabelTask, ml100k_genres, synthetic_ehr
from calib_ext.conformal.quantile import ltt_threshold
from calib_ext.conformal.risk_control import crc_threshold_path
from calib_ext.conformal.sets import flat_entry_times, hierarchical_entry_times
from calib_ext.conformal.severity import CLOSE, SeverityCurves, hierarchy_distances

NAME = "conformal_severity"
FIGURE = Path(__file__).resolve().parent.parent / "docs" / "img" / f"{NAME}.png"
TASKS = {"ehr": synthetic_ehr, "ml100k": ml100k_genres}
ALPHAS = {"ehr": [0.05, 0.1, 0.15, 0.2], "ml100k": [0.1, 0.15, 0.2, 0.3]}
# quantile tolerances: a genre miss costs at least 0.5 / |Y|, so small tolerances force full sets there
TOLERANCES = {"ehr": [0.1, 0.2, 0.3, 0.4], "ml100k": [0.34, 0.5, 0.67]}
BETA, DELTA = 0.1, 0.1
METHODS = ["CSC mean", "CRC-sev flat", "CRC-FNR", "CRC-FNR size-matched"]
BOOTSTRAP = 5000
QUANTILE = "CSC quantile"
SHARED = ("fnr", "size", "exact", "close", "distant", "lambda")


def label_cost_classes(curves: SeverityCurves, lam: float) -> np.ndarray:
    """``[n, 3]`` per instance: shares of its true labels exact / close / distant at ``lam``."""
    cost = curves.label_costs(lam)
    cnt = np.maximum(curves.valid.sum(1), 1)[:, None]
    exact = ((cost == 0) & curves.valid).sum(1)
    close = ((cost > 0) & (cost <= CLOSE) & curves.valid).sum(1)
    distant = ((cost > CLOSE) & curves.valid).sum(1)
    return np.stack([exact, close, distant], axis=1) / cnt


def size_matched_lambda(flat: SeverityCurves, target_size: float) -> float:
    """Smallest flat threshold whose mean set size on ``flat``'s instances reaches ``target_size``."""
    t = np.sort(flat.entry_times.ravel())
    need = int(np.ceil(target_size * len(flat) - 1e-9))
    return float(t[min(max(need, 1), len(t)) - 1])


def run_task(task: MultiLabelTask, alphas: list[float], tolerances: list[float], splits: int, seed: int
             ) -> dict[str, Any]:
    """All methods on ``splits`` random halvings of the task's pool; per-split and per-instance records.

    Besides the split test, every split draws a calibration sample of the same size *with replacement*
    from the pool and measures the population quantities exactly on the whole pool (the pool is then
    the population, and the draw is i.i.d. from it): the CRC population severity and the LTT population
    exceedance, free of test-sample noise.
    """
    dist = hierarchy_distances(task.hierarchy, task.labels)
    hier = SeverityCurves(hierarchical_entry_times(task.scores, task.hierarchy, task.labels), task.true, dist)
    flat = SeverityCurves(flat_entry_times(task.scores), task.true, dist)
    crit = {t: hier.critical_lambdas(t) for t in tolerances}
    n = len(hier)
    rng = np.random.default_rng(10_000 + seed)
    records: dict[str, dict[str, list[float]]] = {f"{m}|{a}": {} for m in METHODS for a in alphas}
    records.update({f"{QUANTILE}|{t}": {} for t in tolerances})
    # per-instance sums of (CSC - size-matched) distant / exact shares, and counts, for the paired interval
    paired = {a: np.zeros((n, 3)) for a in alphas}
    for _ in tqdm(range(splits), desc=f"{task.name} seed {seed}", leave=False):
        perm = rng.permutation(n)
        cal, test = perm[: n // 2], perm[n // 2:]
        boot = rng.integers(0, n, n // 2)
        hc, ht, fc, ft = hier.subset(cal), hier.subset(test), flat.subset(cal), flat.subset(test)
        hb = hier.subset(boot)
        paths = {"hier": hc.risk_path(), "flat": fc.risk_path(), "fnr": fc.risk_path("fnr"),
                 "boot": hb.risk_path()}
        for a in alphas:
            lams = {
                "CSC mean": (crc_threshold_path(*paths["hier"], len(cal), a), ht),
                "CRC-sev flat": (crc_threshold_path(*paths["flat"], len(cal), a), ft),
                "CRC-FNR": (crc_threshold_path(*paths["fnr"], len(cal), a), ft),
            }
            csc_size = hc.set_sizes(lams["CSC mean"][0]).mean()
            lams["CRC-FNR size-matched"] = (size_matched_lambda(fc, csc_size), ft)
            classes = {}
            for method, (lam, cur) in lams.items():
                cls = label_cost_classes(cur, lam)
                classes[method] = cls
                _append(records[f"{method}|{a}"], {
                    "lambda": lam, "severity": float(cur.losses(lam).mean()),
                    "fnr": float(cur.fnr_losses(lam).mean()), "size": float(cur.set_sizes(lam).mean()),
                    **cur.distance_shares(lam)})
            lam_b = crc_threshold_path(*paths["boot"], len(boot), a)
            _append(records[f"CSC mean|{a}"], {"population_severity": hier.risk(lam_b)})
            diff = classes["CSC mean"] - classes["CRC-FNR size-matched"]
            paired[a][test, 0] += diff[:, 2]
            paired[a][test, 1] += diff[:, 0]
            paired[a][test, 2] += 1
        for t in tolerances:
            lam = ltt_threshold(crit[t][cal], BETA, DELTA)
            loss = ht.losses(lam)
            lam_b = ltt_threshold(crit[t][boot], BETA, DELTA)
            _append(records[f"{QUANTILE}|{t}"], {
                "lambda": lam, "severity": float(loss.mean()), "size": float(ht.set_sizes(lam).mean()),
                "exceedance": float((crit[t][test] > lam).mean()),
                "q90": float(np.quantile(loss, 1 - BETA, method="higher")),
                "population_exceedance": float((crit[t] > lam_b).mean())})
    per_instance = {}
    for a in alphas:
        seen = paired[a][:, 2] > 0
        per_instance[str(a)] = {"distant": (paired[a][seen, 0] / paired[a][seen, 2]).tolist(),
                                "exact": (paired[a][seen, 1] / paired[a][seen, 2]).tolist()}
    return {"records": records, "per_instance": per_instance, "info": task.info}


def _append(rec: dict[str, list[float]], row: dict[str, float]) -> None:
    for key, val in row.items():
        rec.setdefault(key, []).append(val)


def bootstrap_mean(values: np.ndarray, seed: int = 0) -> dict[str, Any]:
    """Mean with a 95 % bootstrap interval (instances resampled with replacement)."""
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), (BOOTSTRAP, len(values)))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return {"mean": float(values.mean()), "ci95": [float(low), float(high)], "n": int(len(values))}


def _pooled(by_seed: dict[str, Any], key: str) -> dict[str, np.ndarray]:
    vals: dict[str, list[float]] = {}
    for run in by_seed.values():
        for name, series in run["records"][key].items():
            vals.setdefault(name, []).extend(series)
    return {k: np.array(v) for k, v in vals.items()}


def summarise(runs: dict[str, dict[str, Any]], alphas: dict[str, list[float]],
              tolerances: dict[str, list[float]]) -> dict[str, Any]:
    """Per task, method and level: means over all splits of all seeds; paired intervals."""
    out: dict[str, Any] = {}
    for task, by_seed in runs.items():
        rows, quantile, shifts = {}, {}, {}
        for a in alphas[task]:
            for m in METHODS:
                v = _pooled(by_seed, f"{m}|{a}")
                row = {"alpha": a, "method": m, "splits": len(v["severity"]),
                       "severity": float(v["severity"].mean()), "severity_sd": float(v["severity"].std()),
                       "splits_above_alpha": float((v["severity"] > a).mean()),
                       **{k: float(v[k].mean()) for k in SHARED}}
                if "population_severity" in v:
                    row["population_severity"] = float(v["population_severity"].mean())
                rows[f"{m}|{a}"] = row
            dist = np.concatenate([np.array(r["per_instance"][str(a)]["distant"]) for r in by_seed.values()])
            exact = np.concatenate([np.array(r["per_instance"][str(a)]["exact"]) for r in by_seed.values()])
            shifts[str(a)] = {"distant": bootstrap_mean(dist), "exact": bootstrap_mean(exact, seed=1)}
        for t in tolerances[task]:
            v = _pooled(by_seed, f"{QUANTILE}|{t}")
            quantile[str(t)] = {
                "tolerance": t, "splits": len(v["severity"]), "lambda": float(v["lambda"].mean()),
                "size": float(v["size"].mean()), "severity": float(v["severity"].mean()),
                "q90": float(v["q90"].mean()), "exceedance": float(v["exceedance"].mean()),
                "splits_ok": float((v["exceedance"] <= BETA).mean()),
                "population_exceedance": float(v["population_exceedance"].mean()),
                "draws_ok": float((v["population_exceedance"] <= BETA).mean())}
        out[task] = {"rows": rows, "quantile": quantile, "shift": shifts}
    return out


def interval(d: dict[str, Any]) -> str:
    """``mean [low, high] (verdict)`` of a bootstrap summary."""
    lo, hi = d["ci95"]
    verdict = "no significant difference" if lo <= 0 <= hi else ("lower" if hi < 0 else "higher")
    return f"{d['mean']:+.4f} [{lo:+.4f}, {hi:+.4f}] ({verdict})"


def render(payload: dict[str, Any]) -> str:
    """Markdown tables from the payload."""
    summary, info = payload["summary"], payload["task_info"]
    seeds, splits = payload["seeds"], payload["splits"]
    lines = [f"## Conformal Severity Control ({len(seeds)} seeds x {splits} random calibration/test "
             "splits)\n",
             f"Command: `{payload['command']}`\n",
             "Severity: each missed true label costs its tree distance to the nearest predicted label over "
             "the largest label distance, averaged over the instance's true labels (= FNR on a flat tree). "
             "Shares: of all true labels, exact hits / close misses (normalised distance <= 0.5) / distant "
             "misses. 'splits > alpha': share of splits whose test severity exceeds alpha (CRC bounds the "
             "mean over splits, not each split). 'population': calibration drawn with replacement from the "
             "pool and the risk measured exactly on the whole pool.\n"]
    for task, res in summary.items():
        ti = info[task]
        lines.append(f"### {ti['name']}\n")
        lines.append(f"Pool {ti['n_pool']} ({ti['n_labels']} labels; predictor trained on {ti['n_train']}: "
                     f"{ti['model']}). Top wrong label is a sibling of a true label in "
                     f"{ti['top_error_sibling_share']:.3f} of instances (a random wrong label: "
                     f"{ti['random_error_sibling_share']:.3f}; seed {seeds[0]}).\n")
        lines.append("Average severity (CRC), target alpha:\n")
        lines.append("| alpha | method | test severity (sd) | population severity | splits > alpha | FNR | "
                     "set size | exact | close | distant |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|")
        for row in res["rows"].values():
            pop = f"{row['population_severity']:.4f}" if "population_severity" in row else "-"
            lines.append(
                f"| {row['alpha']} | {row['method']} | {row['severity']:.4f} ({row['severity_sd']:.4f}) | "
                f"{pop} | {row['splits_above_alpha']:.2f} | {row['fnr']:.4f} | {row['size']:.2f} | "
                f"{row['exact']:.3f} | {row['close']:.3f} | {row['distant']:.3f} |")
        lines.append("")
        lines.append("Upper-quantile severity (CSC quantile: Learn-then-Test, binomial p-values, fixed "
                     f"sequence; beta = {BETA}, delta = {DELTA}: with probability >= {1 - DELTA:.1f}, "
                     f"P(severity > tolerance) <= {BETA}):\n")
        lines.append("| tolerance | set size | test mean severity | test 90% severity | test exceedance | "
                     "splits with test exceedance <= beta | population exceedance | draws with population "
                     "exceedance <= beta |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for q in res["quantile"].values():
            lines.append(f"| {q['tolerance']} | {q['size']:.2f} | {q['severity']:.4f} | {q['q90']:.3f} | "
                         f"{q['exceedance']:.4f} | {q['splits_ok']:.3f} | {q['population_exceedance']:.4f} | "
                         f"{q['draws_ok']:.3f} |")
        lines.append("")
        lines.append("Paired per-instance difference, CSC mean minus size-matched CRC-FNR (95 % bootstrap "
                     "interval over test instances pooled over seeds):\n")
        lines.append("| alpha | distant-miss share | exact-hit share |")
        lines.append("|---|---|---|")
        for a, s in res["shift"].items():
            lines.append(f"| {a} | {interval(s['distant'])} | {interval(s['exact'])} |")
        lines.append("")
    lines.append(f"Time: {payload['seconds']:.0f} s.\n")
    return "\n".join(lines)


def plot(payload: dict[str, Any]) -> Path:
    """Achieved vs target severity per task: CSC mean, CRC-FNR's severity and CSC quantile's 90th pct."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = payload["summary"]
    fig, axes = plt.subplots(1, len(summary), figsize=(5 * len(summary), 4), squeeze=False)
    styles = {"CSC mean": ("severity", "o-", "CSC mean: test severity"),
              "CRC-FNR": ("severity", "s--", "CRC-FNR at the same alpha: test severity")}
    for ax, (task, res) in zip(axes[0], summary.items()):
        alphas = sorted({r["alpha"] for r in res["rows"].values()})
        for method, (key, style, label) in styles.items():
            ys = [res["rows"][f"{method}|{a}"][key] for a in alphas]
            ax.plot(alphas, ys, style, label=label)
            if key == "severity":
                sd = [res["rows"][f"{method}|{a}"]["severity_sd"] for a in alphas]
                ax.fill_between(alphas, np.array(ys) - sd, np.array(ys) + sd, alpha=0.15)
        tols = sorted(q["tolerance"] for q in res["quantile"].values())
        ax.plot(tols, [res["quantile"][str(t)]["q90"] for t in tols], "^-",
                label=f"CSC quantile: test {1 - BETA:.0%} severity vs tolerance")
        top = max(alphas + tols)
        ax.plot([0, top], [0, top], "k:", label="achieved = target")
        ax.set_title(payload["task_info"][task]["name"])
        ax.set_xlabel("target alpha")
        ax.set_ylabel("achieved on test (mean over splits, +-1 sd)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, FIGURE, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--splits", type=int, default=200)
    parser.add_argument("--render-only", action="store_true", help="table and plot again from the JSON")
    ns = parser.parse_args(argv)
    if ns.render_only:
        payload = json.loads((RESULTS / f"{NAME}.json").read_text())
    else:
        start = time.time()
        runs: dict[str, dict[str, Any]] = {}
        info: dict[str, Any] = {}
        for task in ns.tasks:
            runs[task] = {}
            for seed in ns.seeds:
                data = TASKS[task](seed)
                runs[task][str(seed)] = run_task(data, ALPHAS[task], TOLERANCES[task], ns.splits, seed)
                info.setdefault(task, {"name": data.name, **data.info, "per_seed": {}})
                info[task]["per_seed"][str(seed)] = data.info
        command = "python -m benchmarks.conformal_severity" + (
            "" if (ns.splits, ns.seeds, ns.tasks) == (200, [0, 1, 2], list(TASKS))
            else f" --tasks {' '.join(ns.tasks)} --seeds {' '.join(map(str, ns.seeds))} --splits {ns.splits}")
        payload = {"command": command, "seeds": ns.seeds, "splits": ns.splits, "alphas": ALPHAS,
                   "tolerances": TOLERANCES, "beta": BETA, "delta": DELTA, "task_info": info,
                   "summary": summarise(runs, {t: ALPHAS[t] for t in ns.tasks},
                                        {t: TOLERANCES[t] for t in ns.tasks}),
                   "seconds": time.time() - start}
    md = render(payload)
    write_results(NAME, payload, md)
    path = plot(payload)
    print(md)
    print(f"wrote {RESULTS / NAME}.{{json,md}} and {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
