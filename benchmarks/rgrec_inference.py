"""R-GRec adds no inference cost: TIGER's exact scoring and beam search with and without the R-GRec add-on.

Run (all ML-100K test users; smoke: ``--users 64 --no-write``)::

    python -m benchmarks.rgrec_inference
    python -m benchmarks.rgrec_inference --users 64 --repeats 3

Setup. ML-100K (after ``recframe data prepare ml-100k``; otherwise a synthetic catalogue of ML-100K's size,
943 users and 1,682 items, which the JSON names), leave-one-out: the users with a test item, each with the
last ``--history`` items before it (:func:`benchmarks.decoding.load_users`). Codes: a random valid table of
ML-100K's shape (3 x 64 uniform codes + a disambiguation level; ``--codes auto`` fits RQ-KMeans on the item
content features instead, :func:`benchmarks.decoding.make_codes`); the cost does not depend on which.

Models. :class:`recframe.models.generative.TIGER` sized as ``configs/tiger_ml100k.yaml`` (its ``dim``,
``n_layers``, ``n_heads``, ``inner``, ``dropout``, ``history_tokens``, ``normalize``, ``embedding_std`` and
``max_len``), random init, built twice from the same seed: once plain, once with ``addons: [RGRec()]`` (all
three objectives on), the second given the first's ``state_dict`` (a strict load: the add-on's only entry,
its sampling counter, may be missing, and its graph is rebuilt, not loaded) and its item graph built by
``model.bind_data(train)`` from the leave-one-out training split, as at fit.

Timed, per model, in ``torch.inference_mode`` with ``--threads`` torch threads, on the same users in batches
of ``--batch``: exact full-catalogue scoring ``model.score(batch)`` (cached K/V walk) and trie-constrained
beam search ``model.generate(history, k, beam)``. Each of ``--repeats`` rounds times both models, in
alternating order (plain first in even rounds), so drift of a shared machine hits both alike. Reported: each
model's best and median process CPU time, and R-GRec / plain as the median of the per-round ratios (the two
models' runs of one round paired; the headline), of the best times and of the medians. Checked: the two
models' scores and beam results are identical (``torch.equal``).

Training side, for information (not an inference cost): process CPU seconds of one training step (``loss``
+ backward) on ``--train-batch`` windows of ``max_len`` items from the training split, mean of
``--train-steps`` steps after one warm-up step, with and without the add-on; and the graph's size and build
time. Writes ``benchmarks/results/rgrec_inference.{json,md}``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import yaml

from benchmarks.common import write_results
from benchmarks.decoding import SHIPPED_CONFIG, clock, load_users, make_codes
from recframe.data.interactions import DataError, Interactions
from recframe.data.splits import leave_one_out
from recframe.models.generative import TIGER, RGRec

#: keys of ``configs/tiger_ml100k.yaml``'s model.init_args that size the benchmarked TIGER
SIZE_KEYS = ("dim", "n_layers", "n_heads", "inner", "dropout", "history_tokens", "normalize", "embedding_std")


def load_data(n_users: int | None, history: int, seed: int) -> tuple[Interactions, np.ndarray, str]:
    """ML-100K (or an ML-100K-sized synthetic catalogue when it is not prepared), test users' histories."""
    try:
        inter, _, histories = load_users(n_users, history)
        return inter, histories, "ml-100k"
    except DataError as exc:
        print(f"ML-100K not prepared ({exc}); using a synthetic catalogue of its size")
    from recframe.data.synthetic import make_synthetic

    inter = make_synthetic(n_users=943, n_items=1682, mean_length=106, seed=seed)
    hist = inter.histories
    users = np.flatnonzero(hist.lengths() >= 3)[:n_users]
    out = np.zeros((len(users), history), dtype=np.int64)
    for row, user in enumerate(users):
        before = hist.of(int(user))[:-1][-history:]
        out[row, history - len(before):] = before
    return inter, out, "synthetic (ML-100K sizes)"


def build_models(codes: np.ndarray, sizes: tuple[int, ...], n_items: int, train: Interactions,
                 seed: int) -> tuple[TIGER, TIGER, dict[str, Any]]:
    """The plain TIGER and the same weights with the R-GRec add-on (graph bound to ``train``)."""
    with open(SHIPPED_CONFIG) as fh:
        cfg = yaml.safe_load(fh)
    init = cfg["model"]["init_args"]
    kwargs = {key: init[key] for key in SIZE_KEYS if key in init}
    max_len = init.get("max_len", cfg["data"]["max_len"])
    models = []
    for addons in (None, [RGRec()]):
        torch.manual_seed(seed)
        model = TIGER(n_items=n_items, max_len=max_len, addons=addons, **kwargs)
        model.build_backbone(codes, sizes)
        models.append(model)
    plain, rgrec = models
    rgrec.load_state_dict(plain.state_dict())  # strict; the add-on's counter may be absent
    t0 = clock()
    rgrec.bind_data(train)  # the backbone exists: only the add-ons' hook runs (the item graph)
    build = clock() - t0
    graph = rgrec.backbone.addons[0].graph
    buffers = sum(b.numel() * b.element_size() for b in rgrec.backbone.addons[0].buffers())
    info = {"config": "configs/tiger_ml100k.yaml", "sizes": {**kwargs, "max_len": max_len},
            "graph": {"items": graph.n_items, "undirected_edges": graph.n_edges, "buffer_bytes": buffers,
                      "build_wall_s": float(build[0]), "build_cpu_s": float(build[1]),
                      "mean_degree": 2 * graph.n_edges / max(graph.n_items, 1)}}
    return plain.eval(), rgrec.eval(), info


def timed(fn: Callable[[Any], Any], histories: np.ndarray, batch: int) -> tuple[list[Any], np.ndarray]:
    """``fn(history_batch)`` over user batches: outputs and ``[wall, cpu]`` seconds."""
    t0, outs = clock(), []
    for start in range(0, len(histories), batch):
        outs.append(fn(torch.as_tensor(histories[start:start + batch])))
    return outs, clock() - t0


def compare(plain: TIGER, rgrec: TIGER, histories: np.ndarray, ns: argparse.Namespace
            ) -> tuple[dict[str, dict[str, Any]], dict[str, bool]]:
    """Best-of-``repeats`` CPU time of exact scoring and beam search for both models, and equality checks."""
    tasks = {"exact score": lambda m, h: m.score({"history": h}),
             "beam generate": lambda m, h: m.generate(h, k=ns.k, beam=ns.beam)}
    models = {"plain": plain, "rgrec": rgrec}
    seconds: dict[str, dict[str, list[np.ndarray]]] = {t: {m: [] for m in models} for t in tasks}
    outputs: dict[str, dict[str, list[Any]]] = {t: {} for t in tasks}
    with torch.inference_mode():
        for model in models.values():  # warm-up
            for task in tasks.values():
                task(model, torch.as_tensor(histories[: min(8, len(histories))]))
        for round_ in range(ns.repeats):
            order = ["plain", "rgrec"] if round_ % 2 == 0 else ["rgrec", "plain"]
            for task, fn in tasks.items():
                for name in order:
                    outs, sec = timed(lambda h, m=models[name], f=fn: f(m, h), histories, ns.batch)
                    seconds[task][name].append(sec)
                    outputs[task].setdefault(name, outs)
    rows: dict[str, dict[str, Any]] = {}
    for task in tasks:
        for name in models:
            cpu = [float(s[1]) for s in seconds[task][name]]
            wall = [float(s[0]) for s in seconds[task][name]]
            rows[f"{task}, {name}"] = {"cpu_s_best": min(cpu), "cpu_s_median": statistics.median(cpu),
                                       "wall_s_best": min(wall), "cpu_s_all": cpu,
                                       "users_per_cpu_s": len(histories) / min(cpu)}
        plain_row, rgrec_row = rows[f"{task}, plain"], rows[f"{task}, rgrec"]
        rgrec_row["ratio_best"] = rgrec_row["cpu_s_best"] / plain_row["cpu_s_best"]
        rgrec_row["ratio_median"] = rgrec_row["cpu_s_median"] / plain_row["cpu_s_median"]
    exact = outputs["exact score"]
    beam = outputs["beam generate"]
    checks = {
        "exact_scores_identical": all(torch.equal(a, b) for a, b in zip(exact["plain"], exact["rgrec"])),
        "beam_items_identical": all(torch.equal(a.items, b.items)
                                    for a, b in zip(beam["plain"], beam["rgrec"])),
        "beam_log_probs_identical": all(torch.equal(a.log_probs, b.log_probs)
                                        for a, b in zip(beam["plain"], beam["rgrec"])),
    }
    return rows, checks


def training_windows(train: Interactions, batch: int, max_len: int) -> dict[str, torch.Tensor]:
    """``batch`` windows (the last ``max_len`` training items of the first users with history >= 2)."""
    hist = train.histories
    users = np.flatnonzero(hist.lengths() >= 2)[:batch]
    inputs = np.zeros((len(users), max_len), dtype=np.int64)
    targets = np.zeros_like(inputs)
    for row, user in enumerate(users):
        seq = hist.of(int(user))[-(max_len + 1):]
        inputs[row, max_len - len(seq) + 1:] = seq[:-1]
        targets[row, max_len - len(seq) + 1:] = seq[1:]
    return {"input": torch.as_tensor(inputs), "target": torch.as_tensor(targets)}


def training_steps(plain: TIGER, rgrec: TIGER, train: Interactions, ns: argparse.Namespace) -> dict[str, Any]:
    """Mean process CPU seconds of one ``loss`` + backward step, without and with the add-on."""
    batch = training_windows(train, ns.train_batch, plain.max_len)
    out: dict[str, Any] = {"windows": int(batch["input"].shape[0]), "steps": ns.train_steps}
    for name, model in (("plain", plain), ("rgrec", rgrec)):
        model.train()
        cpu = []
        for step in range(ns.train_steps + 1):
            model.zero_grad()
            t0 = clock()
            model.loss(batch).backward()
            if step:  # the first step warms up
                cpu.append(float((clock() - t0)[1]))
        model.eval()
        out[f"{name}_cpu_s"] = float(np.mean(cpu))
    out["ratio"] = out["rgrec_cpu_s"] / out["plain_cpu_s"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=None, help="first N test users (default: all)")
    parser.add_argument("--codes", choices=["random", "auto"], default="random")
    parser.add_argument("--beam", type=int, default=20)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64, help="users per batch")
    parser.add_argument("--history", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per model (best reported)")
    parser.add_argument("--train-batch", type=int, default=128, help="windows per timed training step")
    parser.add_argument("--train-steps", type=int, default=2, help="timed training steps (0: skip)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true")
    ns = parser.parse_args(argv)
    torch.set_num_threads(ns.threads)
    inter, histories, source = load_data(ns.users, ns.history, ns.seed)
    codes, sizes, code_info = make_codes(inter, ns.codes, ns.seed)
    train = leave_one_out(inter).train
    plain, rgrec, info = build_models(codes, sizes, inter.n_items, train, ns.seed)
    print(f"{len(histories)} users, {inter.n_items} items ({source}), codes: {code_info['codes']}, "
          f"graph: {info['graph']}")
    rows, checks = compare(plain, rgrec, histories, ns)
    train_info = training_steps(plain, rgrec, train, ns) if ns.train_steps > 0 else None
    print(checks)
    if not all(checks.values()):
        raise SystemExit("rgrec_inference: the add-on changed an inference output (see checks above)")
    given = argv if argv is not None else sys.argv[1:]
    payload = {
        "command": " ".join(["python -m benchmarks.rgrec_inference",
                             *(a for a in given if a != "--no-write")]),
        "args": vars(ns), "data": source, "data_fingerprint": inter.fingerprint, "n_users": len(histories),
        "n_items": int(inter.n_items), "codebook_sizes": list(sizes), "code_table": code_info,
        "model": info, "rows": rows, "checks": checks, "training": train_info,
    }
    md = render(payload)
    print(md)
    if not ns.no_write:
        write_results("rgrec_inference", payload, md)
    return 0


def render(p: dict[str, Any]) -> str:
    """Markdown table of the payload (from the payload alone, so a saved JSON re-renders)."""
    g, s, a = p["model"]["graph"], p["model"]["sizes"], p["args"]
    lines = [f"## R-GRec inference cost: TIGER with and without the add-on ({p['n_users']} users, "
             f"{p['n_items']} items, {p['data']})", "",
             f"TIGER sized as `{p['model']['config']}` (d={s['dim']}, {s['n_layers']} encoder + "
             f"{s['n_layers']} decoder layers, {s['n_heads']} heads, FFN {s['inner']}, history "
             f"{s['max_len']}, `{s.get('history_tokens')}`, "
             f"normalize `{s.get('normalize')}`), random init, the same weights in both models; codes: "
             f"{p['code_table']['codes']}. Exact scoring is the cached K/V walk; beam search width "
             f"{a['beam']}, top-{a['k']}. {a['batch']} users per batch, {a['threads']} torch thread(s), CPU, "
             f"{a['repeats']} rounds, each timing both models in alternating order. Command: "
             f"`{p['command']}`.", "",
             "| task | model | CPU s (best) | CPU s (median) | users / CPU s (best) | R-GRec / plain, "
             "per-round median (range) | of best | of medians |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, r in p["rows"].items():
        task, model = name.split(", ")
        ratio = " | | "
        if model == "rgrec":
            paired = [x / y for x, y in zip(r["cpu_s_all"], p["rows"][f"{task}, plain"]["cpu_s_all"])]
            ratio = (f"**{statistics.median(paired):.3f}** ({min(paired):.2f}-{max(paired):.2f}) | "
                     f"{r['ratio_best']:.3f} | {r['ratio_median']:.3f}")
        label = "TIGER + R-GRec" if model == "rgrec" else "TIGER"
        lines.append(f"| {task} | {label} | {r['cpu_s_best']:.2f} | {r['cpu_s_median']:.2f} | "
                     f"{r['users_per_cpu_s']:.1f} | {ratio} |")
    c = p["checks"]
    lines += ["", f"Identical outputs: exact scores {c['exact_scores_identical']}, beam items "
              f"{c['beam_items_identical']}, beam log-probabilities {c['beam_log_probs_identical']}. R-GRec "
              "overrides no inference hook, so the two models run the same computation and the ratio is 1 up "
              "to timing noise (the per-round ratio pairs the two models' runs of one round).", "",
              f"Item graph (training split, window 3, built at fit, non-persistent buffers: not in the "
              f"checkpoint): {g['undirected_edges']:,} undirected edges over {g['items']:,} items (mean "
              f"degree {g['mean_degree']:.1f}), {g['buffer_bytes'] / 2**20:.1f} MiB of buffers, built in "
              f"{g['build_cpu_s']:.2f} CPU s."]
    t = p["training"]
    if t:
        lines += ["", f"Training side (not inference): one `loss` + backward step on {t['windows']} windows "
                  f"of {s['max_len']} items, mean of {t['steps']} steps: {t['plain_cpu_s']:.2f} CPU s plain, "
                  f"{t['rgrec_cpu_s']:.2f} CPU s with R-GRec (all three objectives, up to 128 anchors): "
                  f"{t['ratio']:.2f}x."]
    lines += ["", "Times are process CPU seconds (one torch thread on a shared machine; wall time is in the "
              "JSON)."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
