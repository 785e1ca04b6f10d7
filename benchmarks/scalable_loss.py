"""SASRec training steps at 10^5-10^6 items: full softmax vs chunked exact CE vs sampled softmax (logQ).

Run::

    python -m benchmarks.scalable_loss                       # 170k and 1M items (several minutes)
    python -m benchmarks.scalable_loss --items 5000 --steps 1 --no-write     # smoke run

Each (catalogue size, loss) runs in its own process, so the peak resident memory (``ru_maxrss``) is
that configuration's alone; one torch thread unless ``--threads``. A step is one optimiser step of
:class:`recframe.models.SASRec` (batch ``--batch`` x ``--max-len`` positions, all counted, hidden
``--hidden``, 2 blocks, Adam) on a synthetic batch whose items follow a Zipf(1) popularity, the
same distribution as the item counts that ``sampled_logq`` uses as its proposal. ``--warmup``
untimed steps come first. The full softmax is skipped (row marked not feasible) where its
``[positions, items]`` logits alone would exceed ``--max-logits-gb``. On a CUDA device (``--device
auto`` picks it when present) the peak is ``torch.cuda.max_memory_allocated`` instead.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from typing import Any

import numpy as np

from benchmarks.common import worker_row

LOSSES = ("ce", "chunked", "sampled_logq")
LABEL = {"ce": "full softmax", "chunked": "chunked exact CE", "sampled_logq": "sampled softmax + logQ"}


def zipf_probs(n_items: int) -> np.ndarray:
    """Item popularity ``p_j ~ 1 / j`` over ``j = 1..n_items`` (index 0 = padding, probability 0)."""
    p = np.zeros(n_items + 1)
    p[1:] = 1.0 / np.arange(1, n_items + 1)
    return p / p.sum()


def run_one(n_items: int, loss: str, args: argparse.Namespace) -> dict[str, Any]:
    """Time ``args.steps`` SASRec steps with ``loss`` at ``n_items`` items in this process."""
    import torch

    from recframe.models import SASRec

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    model = SASRec(n_items=n_items, max_len=args.max_len, hidden=args.hidden, loss_type=loss,
                   n_negatives=args.n_negatives, chunk_size=args.chunk_size, dropout=0.2).to(device)
    p = zipf_probs(n_items)
    rng = np.random.default_rng(args.seed)
    model.next_item.bind_counts(np.round(p * 10 * n_items).astype(np.int64))
    seq = rng.choice(n_items + 1, size=(args.batch, args.max_len + 1), p=p)
    batch = {"input": torch.as_tensor(seq[:, :-1], device=device),
             "target": torch.as_tensor(seq[:, 1:], device=device)}
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        value = model.loss(batch)
        value.backward()
        opt.step()
        return float(value.detach())

    setup_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    first = [step() for _ in range(args.warmup)]
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start, cpu = time.perf_counter(), time.process_time()
    values = [step() for _ in range(args.steps)]
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = (time.perf_counter() - start) / args.steps
    cpu = (time.process_time() - cpu) / args.steps
    peak = (torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20)
    return {"items": n_items, "loss": loss, "feasible": True, "device": str(device),
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "threads": args.threads, "positions": int((batch["target"] > 0).sum()),
            "s_per_step": seconds, "steps_per_s": 1.0 / seconds, "cpu_s_per_step": cpu, "peak_gb": peak,
            "peak_kind": "cuda max_memory_allocated" if device.type == "cuda" else "peak RSS",
            "rss_after_setup_gb": setup_gb, "loss_values": first + values}


def logits_gb(n_items: int, args: argparse.Namespace) -> float:
    """Size of the full softmax's float32 ``[positions, n_items + 1]`` logits, in GiB."""
    return args.batch * args.max_len * (n_items + 1) * 4 / 2**30


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One subprocess per (items, loss); rows in order."""
    rows = []
    for n_items in args.items:
        for loss in args.losses:
            if loss == "ce" and logits_gb(n_items, args) > args.max_logits_gb:
                rows.append({"items": n_items, "loss": loss, "feasible": False,
                             "logits_gb": logits_gb(n_items, args)})
                print(f"{n_items} items, {loss}: skipped ({logits_gb(n_items, args):.1f} GiB of logits)",
                      flush=True)
                continue
            row = worker_row("benchmarks.scalable_loss", [str(n_items), loss, *_shared_flags(args)])
            rows.append(row)
            print(f"{n_items} items, {loss}: {row['s_per_step']:.2f} s/step, peak {row['peak_gb']:.2f} GiB",
                  flush=True)
    return rows


def _shared_flags(args: argparse.Namespace) -> list[str]:
    return ["--batch", str(args.batch), "--max-len", str(args.max_len), "--hidden", str(args.hidden),
            "--chunk-size", str(args.chunk_size), "--n-negatives", str(args.n_negatives),
            "--steps", str(args.steps), "--warmup", str(args.warmup), "--threads", str(args.threads),
            "--device", args.device, "--seed", str(args.seed)]


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """The results table."""
    lines = [f"# SASRec step at large catalogues (batch {args.batch}, max_len {args.max_len}, hidden "
             f"{args.hidden}, {args.threads} thread(s))", "",
             f"chunk_size {args.chunk_size}; sampled softmax: in-batch + {args.n_negatives} uniform "
             f"negatives, logQ-corrected; {args.warmup} warm-up + {args.steps} timed steps per row.", "",
             "Wall and CPU seconds per step: with one thread, CPU seconds are what an idle machine's wall "
             "time would be (the wall time also counts waiting for a busy machine's cores).", "",
             "| items | loss | wall s / step | CPU s / step | steps / s (wall) | peak memory (GiB) "
             "| device |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r["feasible"]:
            lines.append(f"| {r['items']:,} | {LABEL[r['loss']]} | not run: the logits alone are "
                         f"{r['logits_gb']:.1f} GiB | – | – | – | – |")
            continue
        lines.append(f"| {r['items']:,} | {LABEL[r['loss']]} | {r['s_per_step']:.2f} | "
                     f"{r['cpu_s_per_step']:.2f} | {r['steps_per_s']:.3f} | {r['peak_gb']:.2f} "
                     f"({r['peak_kind']}) | {r['device_name']} |")
    return "\n".join(lines) + "\n"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, nargs="+", default=[170_000, 1_000_000])
    ap.add_argument("--losses", nargs="+", choices=LOSSES, default=list(LOSSES))
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--max-len", type=int, default=50)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--chunk-size", type=int, default=8192)
    ap.add_argument("--n-negatives", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-logits-gb", type=float, default=8.0,
                    help="skip the full softmax where its logits alone exceed this")
    ap.add_argument("--name", default="scalable_loss", help="results file stem")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--worker", nargs=2, metavar=("ITEMS", "LOSS"), help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    args = parse(argv)
    if args.worker:
        print(json.dumps(run_one(int(args.worker[0]), args.worker[1], args)))
        return []
    rows = measure(args)
    if not args.no_write:
        from benchmarks.common import write_measured

        write_measured(args.name, "benchmarks.scalable_loss", argv, vars(args), rows, markdown(rows, args))
    print(markdown(rows, args))
    return rows


if __name__ == "__main__":
    main()
