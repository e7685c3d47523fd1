"""Run-to-run noise: how far a figure of unchanged code moves between separate runs.

One run's confidence interval only shows the spread inside that run. Between runs the GPU's
clocks, temperature, memory placement and library heuristics change too, so unchanged code moves
more: a fresh ch13 run on the same H200 moved two speedups by 3.7% and 7.2% while their within-run
intervals were under 2% wide. A regression is therefore judged against the spread of a figure over
separate runs (its stored ``history``), shrunk towards a prior while that history is short.

Model: a run's figure is ``level * exp(e)`` with ``e ~ N(0, sigma)``. ``sigma`` gets a
scaled-inverse-chi-squared prior worth ``runs`` runs at ``sigma`` (:class:`Prior`: one for ratios,
a wider, weaker one for absolute times); with ``n`` stored runs the estimate is ``(runs * sigma**2 +
sum of squared log deviations) / (runs + n - 1)`` and a new run lies within Student-t bounds of
``runs + n - 1`` degrees of freedom
around the stored runs' geometric mean. tests/test_judge_simulation.py checks the calibration.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@dataclass(frozen=True)
class Prior:
    """What a figure's run-to-run noise is taken to be before its history says: ``sigma`` (std of the
    log figure per run), worth ``runs`` runs."""

    sigma: float
    runs: int


RATIO_PRIOR = Prior(sigma=0.035, runs=12)
"""The speedup (interleaved variants: clock drift cancels). Two runs then differ by 4.9% (one std):
the 3.7% and 7.2% moves of identical ch13 code on the H200 lie within 1.5 of those;
tests/test_judge_simulation.py checks the 1% target on pairs of 2-7% noise. Worth 12 runs: a full
history (ten runs) weighs a little less, so a pair whose few runs happened to agree closely is not
trusted to be that quiet."""
TIME_PRIOR = Prior(sigma=0.15, runs=6)
"""A variant's absolute median time, and the speedup of a pair with a host-bound variant (its events
barely exceed the host's time to issue the work, so host noise, which interleaving does not cancel,
moves the ratio: ch01:arithmetic_intensity's variants both moved +24-26 us on a quiet H200).
Nothing cancels between processes or machine leases: clocks, host load and the allocator's state
all move it. On H200 leases, identical ch01 code moved its host-bound
times a lot while the speedups held: preallocated_buffers' baseline 2.65, 2.77 (one lease), 3.76 and
4.89 ms (the next, two processes), speedup 1.81-1.96x; pinned_memory's baseline 13.8, 14.3, 19.4 and
20.0 ms. So the prior is wide and weighs six runs: with one stored run a time must more than double
(+137%) to count, with those two close runs +92%, with ten quiet runs +37%; the speedup, whose
variants share each moment of the run, is the sensitive figure."""
FALSE_FLAG_RATE = 0.01
"""Share of unchanged pairs flagged regressed (or of identical variants called slower) we accept."""
FIGURES = 3
"""Figures judged per pair (speedup, baseline time, optimized time); each gets an equal share of
``FALSE_FLAG_RATE``."""
MEMORY_TOLERANCE = (0.05, 1 << 20)
"""(relative, bytes): a peak may grow by 5% plus 1 MiB before it counts (allocator rounding and
workspaces; a memory ratio's zero-width interval shows no noise at all)."""
HISTORY_LENGTH = 10
"""Runs kept per stored entry."""


@dataclass(frozen=True)
class Noise:
    """The run-to-run noise of one figure."""

    sigma: float
    """Std of log(figure) between runs."""
    df: int
    """Degrees of freedom of ``sigma`` (prior runs plus the history's)."""


def noise_of(history: Sequence[float], prior: Prior = RATIO_PRIOR) -> Noise:
    """The figure's run-to-run noise from its stored values (each from a separate run)."""
    logs = np.log(np.asarray(history, dtype=np.float64))
    squares = float(((logs - logs.mean()) ** 2).sum()) if logs.size else 0.0
    df = prior.runs + max(logs.size - 1, 0)
    return Noise(math.sqrt((prior.runs * prior.sigma**2 + squares) / df), df)


def log_limit(noise: Noise, reference_runs: int, new_runs: int = 1) -> float:
    """Largest log change of the mean of ``new_runs`` new runs from the mean of ``reference_runs``
    runs that the noise explains at ``FALSE_FLAG_RATE / FIGURES`` (one-sided). For a speedup's one
    new run against one stored run it is 0.162 (17.6%); its prior keeps it above 0.084 (8.7%) even
    for a full history of identical values. The re-runs that confirm a regression are judged as one
    mean of ``new_runs`` (:func:`aisp.judge.regression.confirm`)."""
    return _quantile(noise.df) * noise.sigma * math.sqrt(1 / new_runs + 1 / reference_runs)


@lru_cache(maxsize=64)
def _quantile(df: int) -> float:
    # imported here, as in _median_rank: scipy.stats is ~2 s of CPU at every 'aisp bench run' start
    from scipy.stats import t

    return float(t.isf(FALSE_FLAG_RATE / FIGURES, df))


def memory_slack(peak_bytes: float) -> float:
    """How far a peak may move before it counts: 5% plus 1 MiB."""
    relative, absolute = MEMORY_TOLERANCE
    return relative * peak_bytes + absolute


def geomean(values: Sequence[float]) -> float:
    return float(np.exp(np.mean(np.log(values))))


def median_interval(samples: Sequence[float]) -> tuple[float, float]:
    """Distribution-free 95% interval of the median (order statistics of a binomial count)."""
    x = np.sort(np.asarray(samples, dtype=np.float64))
    k = _median_rank(x.size)
    return float(x[max(k - 1, 0)]), float(x[min(x.size - k, x.size - 1)])


@lru_cache(maxsize=64)
def _median_rank(n: int) -> int:
    """The 1-based rank of the lower bound of the median's 95% interval among ``n`` samples."""
    from scipy.stats import binom

    return int(binom.ppf(0.025, n, 0.5))
