"""A seeded synthetic request stream: prompt and output lengths from log-normal distributions
(clipped), Poisson arrivals, random prompt tokens; the same seed gives the same stream."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class StreamConfig:
    requests: int = 64
    """Requests in the stream."""
    prompt_mean: int = 512
    """Median prompt length (tokens)."""
    output_mean: int = 128
    """Median output length (tokens)."""
    spread: float = 0.6
    """Sigma of the log-normal lengths (0: every request has the median lengths)."""
    max_prompt: int = 2048
    """Longest prompt (lengths are clipped to 1..max)."""
    max_output: int = 512
    """Longest output."""
    rate: float = 0.0
    """Mean arrivals per second (Poisson); 0: every request arrives at time 0 (offline batch)."""
    vocab: int = 32000
    """Prompt tokens are drawn uniformly from 0..vocab-1."""


@dataclass(frozen=True)
class Request:
    rid: int
    """Index in the stream."""
    prompt: torch.Tensor
    """Prompt token ids (CPU, int64)."""
    output_len: int
    """Tokens to generate (the stream fixes it: no end-of-sequence token)."""
    arrival: float
    """Seconds after the stream starts."""


def _lengths(n: int, median: int, cfg: StreamConfig, upper: int, gen: torch.Generator) -> list[int]:
    draws = torch.randn(n, generator=gen, dtype=torch.float64).mul(cfg.spread).add(math.log(median)).exp()
    return [max(1, min(upper, round(x))) for x in draws.tolist()]


def request_stream(cfg: StreamConfig, seed: int) -> list[Request]:
    """The stream's requests, in arrival order."""
    gen = torch.Generator().manual_seed(seed)
    prompts = _lengths(cfg.requests, cfg.prompt_mean, cfg, cfg.max_prompt, gen)
    outputs = _lengths(cfg.requests, cfg.output_mean, cfg, cfg.max_output, gen)
    gaps = (torch.empty(cfg.requests, dtype=torch.float64).exponential_(cfg.rate, generator=gen)
            if cfg.rate > 0 else torch.zeros(cfg.requests, dtype=torch.float64))
    arrivals = gaps.cumsum(0).tolist()
    return [Request(i, torch.randint(cfg.vocab, (p,), generator=gen), o, t)
            for i, (p, o, t) in enumerate(zip(prompts, outputs, arrivals, strict=True))]
