"""IndRM (Independent Risk Minimization): the direct causes of one target from observational data.

Model (the paper's assumption): an additive-noise model for the target,
``Y = f(PA(Y)) + N`` with ``N`` independent of ``PA(Y)``; other variables may
be related in any way, with hidden confounding. Population principle: among
the candidate sets S whose regression residual ``Y - E[Y | S]`` is independent
of S, take the one with the smallest residual variance, and of tied sets the
smallest. Under the paper's "no-backward" condition (no set containing a
descendant of Y gives an independent residual) this is PA(Y).

Finite-sample version implemented here (choices the abstract leaves open):

* E[Y | S] by a pluggable regressor (default: additive cubic splines, see
  :mod:`causal_ext.parents.regressors`), residuals cross-fitted over K folds.
* Independence by the HSIC test of :mod:`causal_ext.parents.hsic` (Gaussian
  kernels, median heuristic; gamma approximation by default, permutations as
  an option; a seeded subsample of ``max_samples`` rows for large n).
* Ties: the one-standard-error rule (:func:`causal_ext.parents.search.select_set`).
* Search: exhaustive (at most 12 candidates) or the greedy forward-backward
  search of :func:`causal_ext.parents.search.greedy_search`; ``"auto"`` is
  exhaustive up to 6 candidates (64 sets) and greedy above.

Identification is reported, not assumed. The principle identifies PA(Y) only
under the no-backward condition; in a linear-Gaussian model it fails (sets
with descendants pass too, and usually have smaller residual variance). After
selecting S the estimator runs the reverse check of
:func:`causal_ext.parents.search.reversible_members`: a selected X_j whose
reverse model ``X_j = g(Y, X_{S-j}) + e`` also has an independent residual
could as well be a child of Y. ``identified_`` is False when some selected
variable is reversible or when tied sets of the same size remain
(``ambiguous``); ``competing_sets_`` then lists the alternatives: for each
reversible j, the set the IndRM rule selects among the scored sets without j,
plus the ambiguous ties. ``parents_`` is still the rule's selection, but a
caller must read it together with ``identified_``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from causal_ext.parents.regressors import Regressor, fold_ids, resolve_regressor
from causal_ext.parents.search import (
    MAX_EXHAUSTIVE,
    HSICSettings,
    SetEvaluator,
    SetScore,
    exhaustive_search,
    greedy_search,
    reversible_members,
    select_set,
)

SEARCHES = ("auto", "exhaustive", "greedy")
AUTO_EXHAUSTIVE_MAX = 6
"""``search="auto"`` is exhaustive up to this many candidates, greedy above."""


class IndRM:
    """Independent Risk Minimization: select the parents of a target (see the module docstring).

    Args:
        regressor: preset name (``"linear"``, ``"spline"``, ``"kernel_ridge"``,
            ``"gbm"``, ``"mlp"``) or any object with scikit-learn's fit/predict.
        search: ``"auto"``, ``"exhaustive"`` (at most 12 candidates) or ``"greedy"``.
        alpha: level of the HSIC residual-independence test.
        test: ``"gamma"`` (Gretton et al. 2008 approximation) or ``"permutation"``.
        n_permutations: permutations for ``test="permutation"``.
        n_folds: folds of the cross-fitting.
        max_samples: rows used by each HSIC test (a seeded subsample when n is
            larger; None for all rows, O(n^2) memory).
        marginal_tests: also test the residual against each regressor and
            combine by Bonferroni (see :class:`~causal_ext.parents.search.HSICSettings`).
        max_size: largest set considered (None: all candidates).
        patience: greedy stopping rule (see :func:`~causal_ext.parents.search.greedy_search`).
        tie_se: tie tolerance in standard errors of the paired variance difference.
        tie_rtol: extra tie tolerance relative to the minimum variance.
        check_reverse: run the reverse-model identification check.
        random_state: seed for the folds, the subsample and permutations.
        n_threads: BLAS and OpenMP threads during ``fit`` (via threadpoolctl).
            The work is many small fits, where threading costs more than it
            gains and oversubscribes a busy machine (a ridge fit measured 30x
            slower with 2 BLAS threads on 2 shared cores); None leaves the
            process-wide settings alone.

    Fitted attributes:
        parents_: selected column indices (tuple, sorted).
        parent_names_: their names (DataFrame columns or ``feature_names``).
        feature_names_in_: names of all candidate columns.
        residual_variance_: out-of-fold residual variance of the selected set.
        pvalue_: its HSIC p-value.
        identified_: False when the data do not single out the selection.
        reversible_: selected columns whose reverse additive-noise model passes.
        competing_sets_: alternative parent sets (tuples of indices) when not identified.
        scores_: every scored set (list of :class:`~causal_ext.parents.search.SetScore`).
        passing_sets_: the scored sets that pass, by increasing residual variance.
        search_: the search actually run (``"exhaustive"`` or ``"greedy"``).
        all_rejected_: True when every scored non-empty set fails the test, so
            the empty set is selected by default: no additive-noise model on
            the candidates fits (or the test has power against every set).
            ``identified_`` is True then only in the sense that nothing is claimed.
        n_samples_: rows used.
    """

    def __init__(self, regressor: str | Regressor = "spline", search: str = "auto", alpha: float = 0.05,
                 test: str = "gamma", n_permutations: int = 200, n_folds: int = 5,
                 max_samples: int | None = 1000, marginal_tests: bool = False, max_size: int | None = None,
                 patience: int = 2,
                 tie_se: float = 1.0, tie_rtol: float = 0.0, check_reverse: bool = True,
                 random_state: int | None = 0, n_threads: int | None = 1) -> None:
        self.regressor = regressor
        self.search = search
        self.alpha = alpha
        self.test = test
        self.n_permutations = n_permutations
        self.n_folds = n_folds
        self.max_samples = max_samples
        self.marginal_tests = marginal_tests
        self.max_size = max_size
        self.patience = patience
        self.tie_se = tie_se
        self.tie_rtol = tie_rtol
        self.check_reverse = check_reverse
        self.random_state = random_state
        self.n_threads = n_threads

    def _validate(self, d: int) -> str:
        if self.search not in SEARCHES:
            raise ValueError(f"search must be one of {', '.join(SEARCHES)}; got {self.search!r}.")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1); got {self.alpha}.")
        if self.test not in ("gamma", "permutation"):
            raise ValueError(f"test must be 'gamma' or 'permutation'; got {self.test!r}.")
        if self.max_samples is not None and self.max_samples < 6:
            raise ValueError(f"max_samples must be >= 6 or None (rows per HSIC test); got {self.max_samples}")
        if self.n_permutations < 1:
            raise ValueError(f"n_permutations must be >= 1; got {self.n_permutations}.")
        if self.patience < 1:
            raise ValueError(f"patience must be >= 1; got {self.patience}.")
        if self.max_size is not None and self.max_size < 0:
            raise ValueError(f"max_size must be >= 0 or None; got {self.max_size}.")
        if self.tie_se < 0 or self.tie_rtol < 0:
            raise ValueError(f"tie_se and tie_rtol must be >= 0; got {self.tie_se}, {self.tie_rtol}.")
        if self.search == "exhaustive" and d > MAX_EXHAUSTIVE:
            raise ValueError(f"search='exhaustive' is limited to {MAX_EXHAUSTIVE} candidate regressors; "
                             f"X has {d} columns. Use search='greedy' (or 'auto').")
        if self.search == "auto":
            return "exhaustive" if d <= AUTO_EXHAUSTIVE_MAX else "greedy"
        return self.search

    def fit(self, X: Any, y: Any, feature_names: Sequence[str] | None = None) -> IndRM:  # noqa: N803
        """Select the parents of ``y`` among the columns of ``X``.

        Args:
            X: (n, d) array or DataFrame of candidate causes (its column names are used).
            y: (n,) target.
            feature_names: names of the columns of X (default: DataFrame
                columns, else ``x0..x{d-1}``).

        Returns:
            self, with the fitted attributes of the class docstring.
        """
        if self.n_threads is None:
            return self._fit(X, y, feature_names)
        with threadpool_limits(limits=self.n_threads):
            return self._fit(X, y, feature_names)

    def _fit(self, X: Any, y: Any, feature_names: Sequence[str] | None) -> IndRM:  # noqa: N803
        names = list(feature_names) if feature_names is not None else None
        if names is None and hasattr(X, "columns"):
            names = [str(c) for c in X.columns]
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float).ravel()
        if X.ndim == 1:
            X = X[:, None]
        if X.ndim != 2 or X.shape[0] != y.shape[0]:
            raise ValueError(f"X must be (n, d) and y (n,) with the same n; got X {X.shape}, y {y.shape}.")
        if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
            raise ValueError("X and y must be finite; drop or impute rows with NaN/inf first.")
        n, d = X.shape
        if names is None:
            names = [f"x{i}" for i in range(d)]
        if len(names) != d:
            raise ValueError(f"feature_names has {len(names)} names for {d} columns of X.")
        mode = self._validate(d)
        rng = np.random.default_rng(self.random_state)
        regressor = resolve_regressor(self.regressor, 0 if self.random_state is None else self.random_state)
        folds = fold_ids(n, self.n_folds, rng)
        evaluator = SetEvaluator(X, y, regressor, folds, alpha=self.alpha,
                                 hsic=HSICSettings(self.test, self.n_permutations, self.max_samples,
                                                   self.marginal_tests), rng=rng)
        tol = {"tie_se": self.tie_se, "tie_rtol": self.tie_rtol}
        if mode == "exhaustive":
            scores = exhaustive_search(evaluator, max_size=self.max_size)
        else:
            scores = greedy_search(evaluator, max_size=self.max_size, patience=self.patience, **tol)
        selection = select_set(scores, **tol)
        best = selection.best

        reversible = reversible_members(evaluator, best.subset) if self.check_reverse else []
        competing: list[tuple[int, ...]] = []
        for j in reversible:
            without = [s for s in scores if j not in s.subset]
            alt = select_set(without, **tol).best.subset
            if alt != best.subset and alt not in competing:
                competing.append(alt)
        for s in selection.ambiguous:
            if s.subset not in competing:
                competing.append(s.subset)

        self.feature_names_in_ = names
        self.search_ = mode
        self.scores_: list[SetScore] = scores
        self.passing_sets_ = sorted((s for s in scores if s.passes), key=lambda s: s.variance)
        self.parents_ = best.subset
        self.parent_names_ = [names[i] for i in best.subset]
        self.residual_variance_ = best.variance
        self.pvalue_ = best.pvalue
        self.reversible_ = reversible
        self.competing_sets_ = competing
        self.identified_ = not reversible and not selection.ambiguous
        self.all_rejected_ = not any(s.passes for s in scores if s.subset)
        self.n_samples_ = n
        return self

    def report(self) -> dict[str, Any]:
        """A JSON-friendly summary of the fit (selected set, identification, passing sets)."""
        if not hasattr(self, "parents_"):
            raise ValueError("IndRM is not fitted; call fit(X, y) first.")
        names = self.feature_names_in_
        return {
            "parents": self.parent_names_,
            "identified": self.identified_,
            "all_rejected": self.all_rejected_,
            "reversible": [names[i] for i in self.reversible_],
            "competing_sets": [[names[i] for i in s] for s in self.competing_sets_],
            "residual_variance": self.residual_variance_,
            "pvalue": self.pvalue_,
            "search": self.search_,
            "n_sets_scored": len(self.scores_),
            "passing_sets": [s.as_dict(names) for s in self.passing_sets_[:10]],
        }


def indrm_parents(data: Any, target: str, candidates: Sequence[str] | None = None, **kwargs: Any) -> IndRM:
    """Fit :class:`IndRM` for column ``target`` of a DataFrame on ``candidates`` (default: all others)."""
    if target not in data.columns:
        raise ValueError(f"target {target!r} is not a column; columns are {list(data.columns)}.")
    cols = [c for c in data.columns if c != target] if candidates is None else list(candidates)
    missing = [c for c in cols if c not in data.columns]
    if missing or target in cols:
        raise ValueError(f"candidates must be columns other than the target; bad: {missing or [target]}.")
    return IndRM(**kwargs).fit(data[cols], data[target].to_numpy())


__all__ = ["AUTO_EXHAUSTIVE_MAX", "IndRM", "SEARCHES", "indrm_parents"]
