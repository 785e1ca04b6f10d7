"""RESIT (Peters et al. 2014) from the ``lingam`` package, run inside its own venv.

Usage (by :mod:`benchmarks.indrm_sachs` through :func:`benchmarks.peer_env.run_peer`)::

    python lingam_resit.py DATA.csv [--alpha 0.01] [--max-depth 4] [--n-estimators 100] [--seed 0]

``DATA.csv`` has a header row of variable names and one numeric row per
sample (already preprocessed and subsampled by the caller). The regressor is
a random forest of depth ``--max-depth`` (the one in lingam's RESIT example) with
``--n-estimators`` trees (scikit-learn's default 100);
``--alpha`` is lingam's level for pruning superfluous edges (its default,
0.01). The last stdout line is one JSON object: the adjacency matrix with
``A[i][j] = 1`` for an edge ``j -> i`` (lingam's convention), the causal
order, the variable names, the fit time and the lingam version.
"""

from __future__ import annotations

import argparse
import csv
import json
import time

import lingam
import numpy as np
from sklearn.ensemble import RandomForestRegressor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--alpha", type=float, default=0.01)
    parser.add_argument("--max-depth", type=int, default=4)
    parser.add_argument("--n-estimators", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args()
    with open(ns.data, newline="") as fh:
        rows = list(csv.reader(fh))
    names, x = rows[0], np.asarray(rows[1:], dtype=float)
    reg = RandomForestRegressor(max_depth=ns.max_depth, n_estimators=ns.n_estimators, random_state=ns.seed)
    start = time.perf_counter()
    model = lingam.RESIT(regressor=reg, random_state=ns.seed, alpha=ns.alpha).fit(x)
    seconds = time.perf_counter() - start
    print(json.dumps({
        "names": names,
        "adjacency": np.asarray(model.adjacency_matrix_).astype(int).tolist(),
        "causal_order": [int(i) for i in model.causal_order_],
        "seconds": seconds,
        "n_samples": int(x.shape[0]),
        "lingam_version": lingam.__version__,
        "alpha": ns.alpha,
        "max_depth": ns.max_depth,
        "n_estimators": ns.n_estimators,
    }))


if __name__ == "__main__":
    main()
