"""Serving latency counters: per request time to first token (TTFT) and time per output token
(TPOT), and for a run tokens/s and goodput (the share of requests meeting a latency target)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class SLO:
    ttft_s: float = 1.0
    """Longest acceptable time from arrival to the first token."""
    tpot_s: float = 0.05
    """Longest acceptable mean time per output token after the first."""


@dataclass
class RequestTimes:
    """Clock readings (seconds, one clock) of one request."""

    arrival: float
    first_token: float | None = None
    tokens: list[float] = field(default_factory=list)
    """Time of every output token, the first included."""

    def token(self, now: float) -> None:
        if self.first_token is None:
            self.first_token = now
        self.tokens.append(now)

    @property
    def ttft(self) -> float:
        assert self.first_token is not None, "no token yet"
        return self.first_token - self.arrival

    @property
    def tpot(self) -> float:
        """Mean gap between output tokens (0 for a one-token output)."""
        gaps = len(self.tokens) - 1
        return (self.tokens[-1] - self.tokens[0]) / gaps if gaps else 0.0


def _quantile(values: list[float], q: float) -> float:
    return float(torch.tensor(values, dtype=torch.float64).quantile(q))


def summarize(times: list[RequestTimes], slo: SLO) -> dict[str, float]:
    """p50/p99 TTFT and TPOT (ms), output tokens/s over the run, and goodput: the share of
    requests whose TTFT and TPOT both meet ``slo`` (and meeting requests per second)."""
    done = [t for t in times if t.tokens]
    start, end = min(t.arrival for t in done), max(t.tokens[-1] for t in done)
    span = max(end - start, 1e-9)
    good = [t for t in done if t.ttft <= slo.ttft_s and t.tpot <= slo.tpot_s]
    ttft, tpot = [t.ttft * 1e3 for t in done], [t.tpot * 1e3 for t in done]
    return {"ttft_p50_ms": _quantile(ttft, 0.5), "ttft_p99_ms": _quantile(ttft, 0.99),
            "tpot_p50_ms": _quantile(tpot, 0.5), "tpot_p99_ms": _quantile(tpot, 0.99),
            "tokens_per_s": sum(len(t.tokens) for t in done) / span,
            "goodput": len(good) / len(times), "good_requests_per_s": len(good) / span}
