"""Cold-start items on ML-100K (or Amazon): recommend items whose interactions were all removed from training.

Run (after ``recframe data prepare ml-100k``)::

    python -m benchmarks.cold_start --rows FLASH "FLASH (no alignment)" SASRec --seeds 0 1 2
    python -m benchmarks.cold_start --render-only
    python -m benchmarks.cold_start --dataset beauty    # the same protocol on Amazon Beauty (sports, toys)

Protocol (:mod:`recframe.data.cold_start`): 10 % of the items (168 of 1,682, drawn once with seed 0 and
the same for every run) are held out with all their interactions; each model trains on the warm rows with
its own config (early stopping on the warm validation set) and is then asked, for every user with a cold
interaction (926 users), to rank the cold items from the user's warm history before it. Metrics are the
evaluator's (pessimistic ties) over the cold items only (:mod:`recframe.metrics.cold_start`). Model seeds
vary, the cold set does not, so every run answers the same cases and a gain gets a per-case paired
bootstrap interval (:func:`benchmarks.per_user.bootstrap_difference`).

Rows. Content kNN (training-free: cosine between the mean all-MiniLM-L6-v2 embedding of the history and
each cold item's, the content-only reference), SASRec (item-ID embeddings: a cold item's row is never
trained, so it shows what an ID model can do: nothing), TIGER with RQ-KMeans text IDs (the tokenizer sees
every item's content, no interaction; a cold item's path is in its trie, so it is scored like any other),
FLASH with and without semantic alignment. Every run writes
``benchmarks/results/cold_start/ROW__seedS.json`` as it finishes; ``--render-only`` builds
``benchmarks/results/cold_start.{json,md}``.

``--dataset beauty`` (``sports``, ``toys``) runs the same protocol on an Amazon dataset (after ``recframe data
prepare amazon-beauty``): the same cold fraction and cold-set seed (10 % of the items, e.g. 1,210 of Beauty's
12,101), the same rows on ``configs/amazon/<model>_<dataset>.yaml``, where the item content is the attribute
multi-hot (no item text exists): content kNN over it and TIGER on attribute IDs (``tiger_<dataset>``; the
collaborative-ID rows cannot place a cold item). Its runs and table are
``benchmarks/results/cold_start_amazon_<dataset>/`` and ``cold_start_amazon_<dataset>.{json,md}``; the
default (``ml100k``) keeps every path, row and setting above.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from benchmarks.common import RESULTS, claim, fit_and_test, write_results
from benchmarks.devices import refusal
from benchmarks.per_user import bootstrap_difference
from recframe.checkpoint_io import atomic_write
from recframe.data.cold_start import ColdEvalSet
from recframe.features.text_encoder import DEFAULT_ENCODER
from recframe.metrics.cold_start import cold_start_metrics, cold_start_ranks

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
RUNS = RESULTS / "cold_start"
RUN_LOGS = Path("runs")
COLD = {"fraction": 0.1, "seed": 0}
KS = (10, 20)
ROWS: dict[str, str | None] = {
    "Content kNN": None,
    "SASRec": "sasrec_ml100k.yaml",
    "TIGER (text IDs)": "tiger_ml100k.yaml",
    "FLASH": "flash_ml100k.yaml",
    "FLASH (no alignment)": "flash_ml100k.yaml",
}
EXTRA: dict[str, list[str]] = {"FLASH (no alignment)": ["--model.init_args.align_weight", "0.0"]}
#: (baseline, alternative) pairs with a paired interval
PAIRS = [("TIGER (text IDs)", "FLASH"), ("FLASH (no alignment)", "FLASH"), ("Content kNN", "FLASH"),
         ("Content kNN", "TIGER (text IDs)"), ("SASRec", "FLASH")]


@dataclass(frozen=True)
class Protocol:
    """One dataset's cold-start benchmark: what it loads, which configs its rows train, where it writes.

    ``rows`` maps a row to its config (relative to ``configs/``; ``None`` for the training-free content
    kNN), ``encoder`` is the content kNN's :func:`recframe.features.item_content_features` encoder, and
    ``name`` names the results (``benchmarks/results/<name>/`` per run, ``<name>.{json,md}`` the table) and
    prefixes the run logs (``runs/cold_<run file stem>`` on ML-100K, ``runs/<name>__<stem>`` elsewhere).
    """

    dataset: str
    title: str
    name: str
    rows: dict[str, str | None]
    pairs: list[tuple[str, str]]
    encoder: str = DEFAULT_ENCODER
    extra: dict[str, list[str]] = field(default_factory=lambda: dict(EXTRA))

    @property
    def runs(self) -> Path:
        """The folder of finished runs (one JSON per row and seed)."""
        return RESULTS / self.name

    def log_name(self, run_stem: str) -> str:
        """The run's logger name under ``runs/`` (and its claim file's stem)."""
        return f"cold_{run_stem}" if self.name == "cold_start" else f"{self.name}__{run_stem}"


def amazon_protocol(dataset: str, title: str) -> Protocol:
    """The ML-100K protocol on ``amazon-<dataset>``: attribute content instead of text (none exists)."""
    tiger = "TIGER (attribute IDs)"
    return Protocol(
        dataset=f"amazon-{dataset}", title=f"Amazon {title}", name=f"cold_start_amazon_{dataset}",
        rows={"Content kNN": None, "SASRec": f"amazon/sasrec_{dataset}.yaml",
              tiger: f"amazon/tiger_{dataset}.yaml", "FLASH": f"amazon/flash_{dataset}.yaml",
              "FLASH (no alignment)": f"amazon/flash_{dataset}.yaml"},
        pairs=[(tiger, "FLASH"), ("FLASH (no alignment)", "FLASH"), ("Content kNN", "FLASH"),
               ("Content kNN", tiger), ("SASRec", "FLASH")],
        encoder="none")


PROTOCOLS: dict[str, Protocol] = {
    "ml100k": Protocol(dataset="ml-100k", title="ML-100K", name="cold_start", rows=ROWS, pairs=PAIRS),
    "beauty": amazon_protocol("beauty", "Beauty"),
    "sports": amazon_protocol("sports", "Sports and Outdoors"),
    "toys": amazon_protocol("toys", "Toys and Games"),
}
"""``--dataset`` choices; ``ml100k`` (the default) is the module-level ``ROWS``/``PAIRS``/``RUNS`` setup."""


class ContentKNN(nn.Module):
    """``score(i) = cos(mean of the history's content vectors, content_i)`` (training-free)."""

    def __init__(self, content: np.ndarray) -> None:
        super().__init__()
        self.register_buffer("content", torch.nn.functional.normalize(torch.as_tensor(content), dim=-1))
        self.anchor = nn.Parameter(torch.zeros(0))  # gives the module a device

    def score(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        history = batch["history"]
        profile = (self.content[history] * (history > 0)[..., None]).sum(1)
        return torch.nn.functional.normalize(profile, dim=-1) @ self.content.T


def run_file(row: str, seed: int, protocol: Protocol = PROTOCOLS["ml100k"]) -> Path:
    slug = "".join(c if c.isalnum() else "_" for c in row).strip("_")
    return protocol.runs / f"{slug}__seed{seed}.json"


def cold_hook(cases_box: dict[str, Any]):
    """``after_test`` hook: the tested model's ranks on the datamodule's cold cases."""
    def hook(model: Any, dm: Any) -> dict[str, Any]:
        cases = dm.cold_eval_set()
        cases_box["cases"] = cases
        ranks = cold_start_ranks(model.eval(), cases, max_len=dm.max_len)
        return {"cold": cold_start_metrics(ranks, KS), "cold_ranks": ranks.tolist(),
                "cold_users": cases.users.tolist(), "n_cold_items": len(cases.cold_items)}
    return hook


def content_knn(seed: int, protocol: Protocol = PROTOCOLS["ml100k"]) -> dict[str, Any]:
    """The training-free content baseline on the same cases (``seed`` is unused: it is deterministic)."""
    from recframe.data.datamodule import RecDataModule
    from recframe.features import item_content_features

    dm = RecDataModule(dataset=protocol.dataset, cold_items=COLD, max_len=50)
    cases: ColdEvalSet = dm.cold_eval_set()
    model = ContentKNN(item_content_features(dm.split.train.item_features, encoder=protocol.encoder))
    ranks = cold_start_ranks(model, cases, max_len=50)
    return {"cold": cold_start_metrics(ranks, KS), "cold_ranks": ranks.tolist(),
            "cold_users": cases.users.tolist(), "n_cold_items": len(cases.cold_items), "train_seconds": 0.0}


def run_args(row: str, seed: int, protocol: Protocol = PROTOCOLS["ml100k"]) -> list[str]:
    """The ``recframe fit`` overrides of one trained row's run (seeds, cold set, log name, no time cap)."""
    name = protocol.log_name(run_file(row, seed, protocol).stem)
    args = ["--seed_everything", str(seed), "--data.cold_items", json.dumps(COLD),
            "--trainer.logger.init_args.name", name, "--trainer.max_time", "null",
            *protocol.extra.get(row, [])]
    if row != "SASRec":
        args += ["--model.init_args.tokenizer.init_args.seed", str(seed)]
    return args


def run_one(row: str, seed: int, protocol: Protocol = PROTOCOLS["ml100k"]) -> dict[str, Any]:
    config = protocol.rows[row]
    if config is None:
        return content_knn(seed, protocol)
    name = protocol.log_name(run_file(row, seed, protocol).stem)
    resume = max((RUN_LOGS / name).glob("version_*/checkpoints/last.ckpt"), default=None,
                  key=lambda p: p.stat().st_mtime)
    return fit_and_test(CONFIGS / config, run_args(row, seed, protocol), ckpt_path=resume,
                        after_test=cold_hook({}))


def run_all(rows: list[str], seeds: list[int], protocol: Protocol = PROTOCOLS["ml100k"]) -> None:
    protocol.runs.mkdir(parents=True, exist_ok=True)
    for row in rows:
        for seed in seeds if protocol.rows[row] is not None else [0]:
            path = run_file(row, seed, protocol)
            if path.exists():
                continue
            with claim(RUN_LOGS / f"{protocol.log_name(path.stem)}.claim") as mine:
                if not mine or path.exists():
                    continue
                print(f"[run] {row} seed {seed}", flush=True)
                result = {"row": row, "seed": seed, **run_one(row, seed, protocol)}
                if protocol.name != "cold_start":
                    result["dataset"] = protocol.dataset
                text = json.dumps(result, indent=2, default=str).encode()
                atomic_write(path, lambda fh, t=text: fh.write(t))
                print(f"[done] {row} seed {seed}: cold ndcg@10 {result['cold']['ndcg@10']:.4f}", flush=True)


def load_runs(protocol: Protocol = PROTOCOLS["ml100k"]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(protocol.runs.glob("*.json")):
        run = json.loads(path.read_text())
        grouped.setdefault(run["row"], []).append(run)
    return {row: sorted(grouped[row], key=lambda r: r["seed"]) for row in protocol.rows if row in grouped}


def per_case_ndcg(runs: list[dict[str, Any]]) -> np.ndarray:
    """Per-case NDCG@10 averaged over a row's seeds (cases in the same order for every run)."""
    ranks = np.array([r["cold_ranks"] for r in runs], dtype=np.float64)
    return np.where(ranks < 10, 1.0 / np.log2(ranks + 2.0), 0.0).mean(0)


def render(protocol: Protocol = PROTOCOLS["ml100k"]) -> None:
    runs = load_runs(protocol)
    summary, pairs = {}, {}
    for row, group in runs.items():
        entry = {"seeds": [r["seed"] for r in group]}
        for metric in [f"{m}@{k}" for m in ("ndcg", "recall") for k in KS]:
            values = [r["cold"][metric] for r in group]
            entry[metric] = (statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0)
        if group[0].get("test"):
            values = [r["test"]["ndcg@10"] for r in group]
            entry["warm_test_ndcg@10"] = (statistics.fmean(values),
                                          statistics.stdev(values) if len(values) > 1 else 0.0)
        entry["n_cases"] = len(group[0]["cold_ranks"])
        summary[row] = entry
    for base, alt in protocol.pairs:
        if base in runs and alt in runs:
            refused = refusal(runs[base], runs[alt])  # never pair a GPU run with a CPU run
            if refused is not None:
                pairs[f"{alt} - {base}"] = refused
                continue
            diff = per_case_ndcg(runs[alt]) - per_case_ndcg(runs[base])
            pairs[f"{alt} - {base}"] = bootstrap_difference(diff)
    source = "`benchmarks/cold_start.py`"
    if protocol.name != "cold_start":
        source = (f"`python -m benchmarks.cold_start --dataset {protocol.dataset.removeprefix('amazon-')}`; "
                  "item content: the attribute multi-hot")
    lines = [f"# Cold-start items on {protocol.title}", "",
             f"{COLD['fraction']:.0%} of the items held out of training with all their interactions "
             "(cold set seed 0, fixed); each cold case ranks the cold items from the user's warm history "
             f"({source}). Mean ± std over model seeds.", "",
             "| model | seeds | cold NDCG@10 | cold Recall@10 | cold Recall@20 | warm test NDCG@10 |",
             "|---|---|---|---|---|---|"]
    for row, e in summary.items():
        warm = e.get("warm_test_ndcg@10")
        lines.append(f"| {row} | {len(e['seeds'])} | {e['ndcg@10'][0]:.4f} ± {e['ndcg@10'][1]:.4f} | "
                     f"{e['recall@10'][0]:.4f} ± {e['recall@10'][1]:.4f} | "
                     f"{e['recall@20'][0]:.4f} ± {e['recall@20'][1]:.4f} | "
                     + (f"{warm[0]:.4f} ± {warm[1]:.4f} |" if warm else "– |"))
    if pairs:
        lines += ["", "| difference (cold NDCG@10, per case) | mean | 95 % interval |", "|---|---|---|"]
        for name, p in pairs.items():
            if "refused" in p:
                lines.append(f"| {name} | not compared | {p['refused']} |")
                continue
            low, high = p["ci95"]
            verdict = "" if p["significant"] else " (no significant difference)"
            lines.append(f"| {name} | {p['mean']:+.4f} | [{low:+.4f}, {high:+.4f}]{verdict} |")
    payload: dict[str, Any] = {"cold": COLD, "rows": summary, "paired": pairs}
    if protocol.name != "cold_start":
        payload["dataset"] = protocol.dataset
    write_results(protocol.name, payload, "\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="ml100k", choices=list(PROTOCOLS),
                        help="ml100k (default) or an Amazon dataset: beauty, sports, toys")
    parser.add_argument("--rows", nargs="+", default=None,
                        help=f"rows to run (default: all of the dataset's); ML-100K: {', '.join(ROWS)}; "
                             f"Amazon: {', '.join(PROTOCOLS['beauty'].rows)}")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--render-only", action="store_true")
    args = parser.parse_args(argv)
    protocol = PROTOCOLS[args.dataset]
    rows = args.rows if args.rows is not None else list(protocol.rows)
    unknown = [row for row in rows if row not in protocol.rows]
    if unknown:
        parser.error(f"--rows {unknown[0]!r} is not a row of --dataset {args.dataset}; choose from "
                     f"{', '.join(protocol.rows)}.")
    if args.threads:
        torch.set_num_threads(args.threads)
    if not args.render_only:
        run_all(rows, args.seeds, protocol)
    render(protocol)


if __name__ == "__main__":
    main()
