"""IndRM's functional core: score regressor sets, apply the selection rule, search the subsets.

* :class:`SetEvaluator` scores a candidate set S of columns of X for target y:
  cross-fitted residuals of E[y | X_S], their mean square (the residual
  variance) and an HSIC test of residual against X_S (the empty set passes
  trivially: a residual is independent of a constant). Scores are cached.
* :func:`select_set` is the population principle of the paper on a finite
  family of scored sets: among the sets whose residual passes (HSIC p-value
  >= alpha), take the smallest residual variance; every passing set whose
  variance is *tied* with that minimum competes, and the smallest of them wins
  (ties in size: the smaller variance). Tie tolerance (a choice the abstract
  leaves open): the one-standard-error rule of cross-validated model
  selection (Breiman et al. 1984; Hastie, Tibshirani & Friedman, ESL 7.10) --
  set T ties with the minimiser M when
  ``var(T) - var(M) <= tie_se * SE + tie_rtol * var(M)``, with SE the standard
  error of the mean of the paired differences of squared out-of-fold
  residuals ``r_T^2 - r_M^2``. Defaults ``tie_se=1``, ``tie_rtol=0``.
* :func:`exhaustive_search` scores every subset (refused above
  :data:`MAX_EXHAUSTIVE` candidates). :func:`greedy_search` is the local,
  non-interventional search: forward additions then backward removals, see
  its docstring for the stopping rule.
* :func:`reversible_members` is the identification check: for each selected
  variable X_j it fits the *reverse* additive-noise model X_j = g(Y, X_{S-j}) + e
  and tests e against (Y, X_{S-j}). If that also passes, the data are as well
  explained with X_j a child of Y (the linear-Gaussian case is the classical
  example), so X_j's status as a parent is not identified from the data.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from causal_ext.parents.hsic import HSICResult, hsic_test
from causal_ext.parents.regressors import Regressor, crossfit_residuals

MAX_EXHAUSTIVE = 12
"""Largest number of candidate regressors the exhaustive search accepts (2^12 = 4096 sets)."""

Subset = tuple[int, ...]


@dataclass(frozen=True)
class SetScore:
    """The score of one regressor set.

    Attributes:
        subset: sorted column indices of the set.
        variance: mean squared out-of-fold residual.
        statistic: HSIC statistic ``n * HSIC_b`` of residual vs X_S (0 for the empty set).
        pvalue: HSIC p-value (1 for the empty set).
        log_pvalue: its natural log (keeps order below 1e-300).
        passes: ``pvalue >= alpha``.
        sq_residuals: per-row squared out-of-fold residuals (for the tie rule).
    """

    subset: Subset
    variance: float
    statistic: float
    pvalue: float
    log_pvalue: float
    passes: bool
    sq_residuals: np.ndarray = field(repr=False, compare=False)

    def as_dict(self, names: Sequence[str] | None = None) -> dict:
        """A JSON-friendly summary (names instead of indices when given)."""
        members = [names[i] for i in self.subset] if names is not None else list(self.subset)
        return {"set": members, "variance": self.variance, "pvalue": self.pvalue,
                "log_pvalue": self.log_pvalue, "statistic": self.statistic, "passes": self.passes}


@dataclass
class HSICSettings:
    """How residuals are tested: method, permutations, the subsample for large n, marginal tests.

    With ``marginals`` a set of k > 1 regressors is tested k + 1 times (the
    joint test and one test per regressor) and the p-value is the Bonferroni
    combination ``min(1, (k + 1) * min_i p_i)``: the level is kept and power
    is gained against dependence on a single regressor, which a joint
    Gaussian-kernel test in many dimensions loses.
    """

    method: str = "gamma"
    n_permutations: int = 200
    max_samples: int | None = 1000
    marginals: bool = False


class SetEvaluator:
    """Scores regressor sets for one target, with a cache.

    Args:
        X: (n, d) candidate regressors.
        y: (n,) target.
        regressor: scikit-learn-style regressor (cloned per fold).
        folds: (n,) fold ids for cross-fitting (shared by every set, so
            variances are comparable row by row).
        alpha: level of the residual independence test.
        hsic: test settings; with ``max_samples`` below n one seeded subsample
            of rows is drawn once and used for every set's test.
        rng: seed or generator for the subsample and permutations.
    """

    def __init__(self, X: np.ndarray, y: np.ndarray, regressor: Regressor, folds: np.ndarray, *,  # noqa: N803
                 alpha: float = 0.05, hsic: HSICSettings | None = None,
                 rng: np.random.Generator | int | None = None) -> None:
        self.X = np.asarray(X, dtype=float)
        self.y = np.asarray(y, dtype=float)
        self.regressor = regressor
        self.folds = folds
        self.alpha = alpha
        self.hsic = hsic or HSICSettings()
        self.rng = np.random.default_rng(rng)
        n = self.X.shape[0]
        m = self.hsic.max_samples
        self.test_rows = (np.sort(self.rng.choice(n, size=m, replace=False)) if m is not None and n > m
                          else np.arange(n))
        self.cache: dict[Subset, SetScore] = {}

    def test(self, resid: np.ndarray, regressors: np.ndarray) -> HSICResult:
        """HSIC test of a residual against regressors on the evaluator's test rows (see HSICSettings)."""
        rows = self.test_rows
        r, x = resid[rows], regressors[rows].reshape(len(rows), -1)
        kw = {"method": self.hsic.method, "n_permutations": self.hsic.n_permutations, "rng": self.rng}
        joint = hsic_test(r, x, **kw)
        if not self.hsic.marginals or x.shape[1] < 2:
            return joint
        results = [joint, *(hsic_test(r, x[:, j], **kw) for j in range(x.shape[1]))]
        logp = min(0.0, float(np.log(len(results))) + min(res.log_pvalue for res in results))
        return HSICResult(joint.statistic, float(np.exp(logp)), logp, joint.n, joint.method + "+marginals")

    def evaluate(self, subset: Iterable[int]) -> SetScore:
        """Score of ``subset`` (cached)."""
        key: Subset = tuple(sorted(int(i) for i in subset))
        if key in self.cache:
            return self.cache[key]
        xs = self.X[:, list(key)]
        resid = crossfit_residuals(xs, self.y, self.regressor, self.folds)
        sq = resid * resid
        if key:
            res = self.test(resid, xs)
            stat, p, logp = res.statistic, res.pvalue, res.log_pvalue
        else:
            stat, p, logp = 0.0, 1.0, 0.0
        score = SetScore(key, float(sq.mean()), stat, p, logp, bool(p >= self.alpha), sq)
        self.cache[key] = score
        return score

    @property
    def scores(self) -> list[SetScore]:
        """Every set scored so far, in evaluation order."""
        return list(self.cache.values())


def ties_with(candidate: SetScore, best: SetScore, *, tie_se: float = 1.0, tie_rtol: float = 0.0) -> bool:
    """True if ``candidate``'s residual variance is within the tie tolerance of ``best``'s (module doc)."""
    diff = candidate.sq_residuals - best.sq_residuals
    n = diff.size
    se = float(diff.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0
    return candidate.variance - best.variance <= tie_se * se + tie_rtol * best.variance


@dataclass(frozen=True)
class Selection:
    """Result of :func:`select_set`.

    Attributes:
        best: the selected set's score.
        minimum: the passing set with the smallest residual variance.
        tied: every passing set tied with ``minimum`` (including ``best``).
        ambiguous: tied sets of the same size as ``best`` but different members
            (the smallest-set rule cannot decide between them).
    """

    best: SetScore
    minimum: SetScore
    tied: tuple[SetScore, ...]
    ambiguous: tuple[SetScore, ...]


def select_set(scores: Iterable[SetScore], *, tie_se: float = 1.0, tie_rtol: float = 0.0) -> Selection:
    """The IndRM rule: min residual variance among passing sets; ties -> the smallest set."""
    passing = [s for s in scores if s.passes]
    if not passing:
        raise ValueError("no scored set passes; score the empty set first (it always passes).")
    minimum = min(passing, key=lambda s: (s.variance, len(s.subset)))
    tied = [s for s in passing if ties_with(s, minimum, tie_se=tie_se, tie_rtol=tie_rtol)]
    best = min(tied, key=lambda s: (len(s.subset), s.variance, s.subset))
    ambiguous = tuple(s for s in tied if len(s.subset) == len(best.subset) and s.subset != best.subset)
    return Selection(best, minimum, tuple(sorted(tied, key=lambda s: (len(s.subset), s.variance))), ambiguous)


def _check_candidates(candidates: Sequence[int], d: int) -> list[int]:
    cands = sorted({int(c) for c in candidates})
    if any(c < 0 or c >= d for c in cands):
        raise ValueError(f"candidates must be column indices in [0, {d}); got {list(candidates)}.")
    return cands


def exhaustive_search(evaluator: SetEvaluator, candidates: Sequence[int] | None = None,
                      max_size: int | None = None) -> list[SetScore]:
    """Score every subset of ``candidates`` (default: all columns) up to ``max_size`` members.

    Raises:
        ValueError: more than :data:`MAX_EXHAUSTIVE` candidates (use the greedy search).
    """
    d = evaluator.X.shape[1]
    cands = _check_candidates(range(d) if candidates is None else candidates, d)
    if len(cands) > MAX_EXHAUSTIVE:
        raise ValueError(f"exhaustive search is limited to {MAX_EXHAUSTIVE} candidate regressors "
                         f"(2^{MAX_EXHAUSTIVE} sets); got {len(cands)}. Use search='greedy'.")
    top = len(cands) if max_size is None else min(max_size, len(cands))
    for size in range(top + 1):
        for subset in itertools.combinations(cands, size):
            evaluator.evaluate(subset)
    return evaluator.scores


def greedy_search(evaluator: SetEvaluator, candidates: Sequence[int] | None = None,
                  max_size: int | None = None, *, patience: int = 2, tie_se: float = 1.0,
                  tie_rtol: float = 0.0) -> list[SetScore]:
    """Local forward-backward search; returns every set it scored (select with :func:`select_set`).

    Forward phase, from the empty set. At each step every one-variable
    extension of the current set is scored. Only *useful* extensions are
    considered: those whose residual variance is below the current set's
    beyond the tie tolerance (the variable explains more of Y). If some useful
    extension passes the independence test, the one with the smallest
    variance is taken; otherwise the useful extension with the largest HSIC
    p-value (the least dependent residual) is taken, so that parents which
    only pass jointly (e.g. confounded with each other) can still be reached.

    Stopping rule: the forward phase stops when (a) no extension is useful,
    (b) the set has ``max_size`` members or no candidates are left, or (c)
    ``patience`` consecutive additions did not improve the IndRM selection
    (a new passing set whose variance is below the selected one's beyond the
    tie tolerance).

    Backward phase, from the currently selected set: every one-variable
    removal is scored; a removal whose set passes and ties with (or beats) the
    selected set is applied (the one with the smallest variance), until none
    qualifies. This drops variables added on the way that the tie rule does
    not need, and scores the sets the tie rule has to compare.
    """
    d = evaluator.X.shape[1]
    cands = _check_candidates(range(d) if candidates is None else candidates, d)
    if patience < 1:
        raise ValueError(f"patience must be >= 1; got {patience}.")
    top = len(cands) if max_size is None else min(max_size, len(cands))
    tol = {"tie_se": tie_se, "tie_rtol": tie_rtol}

    current = evaluator.evaluate(())
    selected = select_set(evaluator.scores, **tol).best
    stale = 0
    while len(current.subset) < top:
        trials = [evaluator.evaluate(current.subset + (j,)) for j in cands if j not in current.subset]
        useful = [t for t in trials if t.variance < current.variance and not ties_with(current, t, **tol)]
        if not useful:
            break
        passing = [t for t in useful if t.passes]
        current = (min(passing, key=lambda t: t.variance) if passing
                   else max(useful, key=lambda t: (t.log_pvalue, -t.variance)))
        new = select_set(evaluator.scores, **tol).best
        improved = new.passes and new.variance < selected.variance and not ties_with(selected, new, **tol)
        selected = new
        stale = 0 if improved else stale + 1
        if stale >= patience:
            break

    while selected.subset:
        removals = [evaluator.evaluate(tuple(i for i in selected.subset if i != j)) for j in selected.subset]
        ok = [r for r in removals if r.passes and (r.variance <= selected.variance
                                                    or ties_with(r, selected, **tol))]
        if not ok:
            break
        selected = min(ok, key=lambda r: r.variance)
    return evaluator.scores


def reversible_members(evaluator: SetEvaluator, subset: Subset) -> list[int]:
    """Members j of ``subset`` whose reverse additive-noise model also passes (see module doc).

    For each j: regress X_j on (y, X_{S-j}) with the evaluator's regressor and
    folds and test the out-of-fold residual against (y, X_{S-j}) at the
    evaluator's level. Returns the j for which the test passes.
    """
    out = []
    for j in subset:
        rest = [i for i in subset if i != j]
        regs = np.column_stack([evaluator.y, evaluator.X[:, rest]])
        resid = crossfit_residuals(regs, evaluator.X[:, j], evaluator.regressor, evaluator.folds)
        if evaluator.test(resid, regs).pvalue >= evaluator.alpha:
            out.append(int(j))
    return out


__all__ = [
    "MAX_EXHAUSTIVE",
    "HSICSettings",
    "Selection",
    "SetEvaluator",
    "SetScore",
    "exhaustive_search",
    "greedy_search",
    "reversible_members",
    "select_set",
    "ties_with",
]
