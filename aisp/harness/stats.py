"""Statistics of timing samples: robust summaries and a paired bootstrap interval for the speedup."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 4000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Summary:
    """Summary of one variant's samples (milliseconds)."""

    n: int
    median: float
    mean: float
    std: float
    p10: float
    p90: float
    min: float
    max: float
    cv: float
    """Coefficient of variation: std / mean."""

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def summarize(samples: Sequence[float]) -> Summary:
    """Median (the headline), mean, std, p10/p90, min/max and CV of the samples."""
    x = np.asarray(samples, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no samples to summarize")
    mean = float(x.mean())
    std = float(x.std(ddof=1)) if x.size > 1 else 0.0
    p10, p50, p90 = np.percentile(x, [10, 50, 90])
    return Summary(
        n=int(x.size), median=float(p50), mean=mean, std=std, p10=float(p10), p90=float(p90),
        min=float(x.min()), max=float(x.max()), cv=std / mean if mean > 0 else 0.0,
    )


@dataclass(frozen=True)
class Ratio:
    """A ratio of medians with its bootstrap confidence interval."""

    value: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def ratio_of_medians(numerator: Sequence[float], denominator: Sequence[float], seed: int = 0,
                     paired: bool = True) -> Ratio:
    """median(numerator) / median(denominator) with a bootstrap 95% interval.

    With ``paired`` (samples taken interleaved in one process) each resample draws the same indices
    from both sides, so drift common to a pair cancels. Samples from separate runs, or of unequal
    lengths, are resampled independently.
    """
    a = np.asarray(numerator, dtype=np.float64)
    b = np.asarray(denominator, dtype=np.float64)
    value = float(np.median(a) / np.median(b))
    rng = np.random.default_rng(seed)
    if paired and a.size == b.size:
        idx = rng.integers(0, a.size, size=(BOOTSTRAP_RESAMPLES, a.size))
        boot = np.median(a[idx], axis=1) / np.median(b[idx], axis=1)
    else:
        ia = rng.integers(0, a.size, size=(BOOTSTRAP_RESAMPLES, a.size))
        ib = rng.integers(0, b.size, size=(BOOTSTRAP_RESAMPLES, b.size))
        boot = np.median(a[ia], axis=1) / np.median(b[ib], axis=1)
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(boot, [tail, 100 - tail])
    return Ratio(value=value, low=float(low), high=float(high))
