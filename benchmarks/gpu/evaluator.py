"""Part (c) of the GPU check: the full-ranking evaluator's users per second on the device."""

from __future__ import annotations

import argparse
from typing import Any

from benchmarks.gpu.support import Emit, left, peak_gib, reset_peak, synchronizer, timed_loop


def part_evaluator(args: argparse.Namespace, deadline: float, emit: Emit) -> None:
    import torch

    from recframe.metrics.evaluator import FullRankingEvaluator

    device = torch.device(args.device)
    sync = synchronizer(args.device)
    for n_items in args.eval_items:
        if left(deadline) < 3.0:
            emit({"kind": "size", "items": n_items, "skipped": "time budget gone"})
            continue
        users = int(max(1, min(args.eval_users, 2**28 // (n_items + 1))))  # a chunk's scores <= 1 GiB
        reset_peak(args.device)
        gen = torch.Generator(device=device).manual_seed(args.seed)
        scores = torch.randn(users, n_items + 1, generator=gen, device=device)
        targets = torch.randint(1, n_items + 1, (users, 1), generator=gen, device=device)
        labels = torch.ones_like(targets)
        seen = torch.randint(1, n_items + 1, (users, 50), generator=gen, device=device)
        seen[seen == targets] = 0
        evaluator = FullRankingEvaluator(n_items, ks=(10, 20))

        def chunk(evaluator: Any = evaluator, scores: Any = scores, targets: Any = targets,
                  labels: Any = labels, seen: Any = seen, users: int = users) -> int:
            evaluator.update(scores, targets, labels, seen)
            return users

        chunk()
        sync()
        seconds, done, reps = timed_loop(chunk, args.min_seconds, deadline, sync)
        metrics = evaluator.compute()
        peak, kind = peak_gib(args.device)
        emit({"kind": "size", "items": n_items, "users_per_s": done / seconds, "chunk_users": users,
              "seconds": seconds, "users": done, "repetitions": reps, "state_device": str(evaluator.device),
              "ndcg@10": metrics.get("ndcg@10"), "peak_gib": peak, "peak_kind": kind})
        del scores, targets, labels, seen, evaluator
