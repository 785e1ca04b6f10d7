"""Per-user leave-one-out test ranks, packed for results JSON, and a paired bootstrap of the difference.

Two recommenders evaluated on the same test users can be compared user by user: the paired difference of
their per-user NDCG@10 removes the spread between users that makes two independent means hard to compare.
Ranks are capped at 10 and stored as one character per user (``"0"``-``"9"``, or ``MISS``), so a whole
training curve of them fits in a results JSON.
"""

from __future__ import annotations

import math
from typing import Any

MISS = "-"  # a per-user rank string holds one character per test user: its 0-based rank, or MISS if >= 10
BOOTSTRAP_SAMPLES = 5000


def pack_ranks(curve: list[dict[str, Any]], users: list[str]) -> None:
    """Replace each epoch's ``{user: rank capped at 10}`` by one compact string in ``users`` order."""
    for row in curve:
        ranks = row.pop("test_rank_per_user", None)
        if ranks is None:
            continue
        missing = set(users) - set(ranks)
        if missing:
            raise ValueError(f"per-user test ranks miss {len(missing)} users (e.g. {sorted(missing)[:3]})")
        row["test_top10_ranks"] = "".join(MISS if ranks[u] >= 10 else str(ranks[u]) for u in users)


def test_ranks(model: Any, dm: Any, k: int = 10) -> dict[str, int]:
    """0-based leave-one-out test rank per raw user id, capped at ``k``, seen items masked (the evaluator's
    own ranks: :func:`recframe.metrics.target_ranks`; the target is relevant whatever its label, so ties put
    it last, as in the evaluator).

    After ``trainer.test`` the model holds these ranks for every test user already (``model.test_ranks``,
    recorded from the scores the evaluator ranked), and they are reused instead of scoring the test set a
    second time: for a generative model's exact scoring on a 12k-item catalogue that second pass cost as
    long as the test itself. A model without them, or with only some users (one process of several), is
    scored here."""
    import torch

    from recframe.metrics import target_ranks

    users = dm.split.train.user_ids
    out: dict[str, int] = {}
    recorded = getattr(model, "test_ranks", None)
    if recorded:  # the last trainer.test pass ranked these users already (RecModel._record_test_ranks)
        wanted = dm.eval_view("test").users.tolist()  # the test loader's users, in its order, unbatched
        if all(u in recorded for u in wanted):
            return {str(users[u]): min(int(recorded[u]), k) for u in wanted}
    with torch.no_grad():
        for batch in dm.test_dataloader():
            ranks, _ = target_ranks(model.score(batch), batch["targets"], batch["labels"], batch["seen"],
                                    disliked_ties="last")
            for user, rank in zip(batch["users"].tolist(), ranks[:, 0].tolist()):  # one target per user
                out[str(users[user])] = min(int(rank), k)
    return out


def rank_string(ranks: dict[str, int], k: int = 10) -> str:
    """Ranks as one character per user in sorted raw-user-id order (``MISS`` at or beyond ``k``)."""
    return "".join(MISS if ranks[u] >= k else str(ranks[u]) for u in sorted(ranks))


def per_user_ndcg(row: dict[str, Any]) -> Any:
    """NDCG@10 per test user (leave-one-out: ``1/log2(rank + 2)`` inside the top 10, else 0), or None."""
    import numpy as np

    ranks = row.get("test_top10_ranks")
    if ranks is None:
        return None
    return np.array([0.0 if c == MISS else 1.0 / math.log2(int(c) + 2) for c in ranks])


def paired_difference(ours: dict[str, Any], theirs: dict[str, Any], seed: int = 0) -> dict[str, Any] | None:
    """Mean per-user test NDCG@10 difference (recframe - RecBole) on the same test users, with a 95 %
    paired bootstrap interval (users resampled with replacement, ``BOOTSTRAP_SAMPLES`` draws); None
    without per-user ranks. A test set of 943 users makes NDCG@10 differences of ~0.01 noise-level, so
    an interval containing 0 means the two are not distinguishable at that point."""
    a, b = per_user_ndcg(ours), per_user_ndcg(theirs)
    if a is None or b is None:
        return None
    return bootstrap_difference(a - b, seed)


def seed_mean_ndcg(runs: list[dict[str, Any]]) -> Any:
    """Per-user NDCG@10 averaged over a model's seeds (runs holding ``test_top10_ranks``, same users)."""
    import numpy as np

    return np.mean([per_user_ndcg(r) for r in runs], axis=0)


def paired_over_seeds(ours: list[dict[str, Any]], theirs: list[dict[str, Any]], seed: int = 0
                      ) -> dict[str, Any]:
    """Paired bootstrap of ``ours - theirs`` over users, each user's NDCG@10 first averaged over each
    model's seeds (so the interval is over the test users, with seed noise averaged out)."""
    return bootstrap_difference(seed_mean_ndcg(ours) - seed_mean_ndcg(theirs), seed)


def bootstrap_difference(diff: Any, seed: int = 0) -> dict[str, Any]:
    """Mean of per-user differences ``diff`` with a 95 % bootstrap interval (users resampled with
    replacement, ``BOOTSTRAP_SAMPLES`` draws) and whether that interval excludes 0."""
    import numpy as np

    diff = np.asarray(diff, dtype=float)
    rng = np.random.default_rng(seed)
    # drawn in blocks of rows (the same stream as one [samples, users] draw) so that 35k users stay small
    block = max(1, min(BOOTSTRAP_SAMPLES, 2_000_000 // max(len(diff), 1)))
    means = np.concatenate([
        diff[rng.integers(0, len(diff), (min(block, BOOTSTRAP_SAMPLES - done), len(diff)))].mean(axis=1)
        for done in range(0, BOOTSTRAP_SAMPLES, block)])
    low, high = np.quantile(means, [0.025, 0.975])
    return {"mean": float(diff.mean()), "ci95": [float(low), float(high)], "users": len(diff),
            "significant": bool(low > 0 or high < 0)}
