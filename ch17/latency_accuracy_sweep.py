"""Latency vs accuracy: early exit and a confidence cascade on the serving kit's decoder, as a Pareto table.

Both trade-offs change the output, so they are a tool, not a pair: each configuration's latency is
measured and its accuracy is stated as agreement with the full model (the share of requests whose
next token is the full model's greedy token).

* exit@l: run only the first l blocks, then the final norm and the LM head (early exit).
* cascade@l>q: run the first l blocks on every request; requests whose top-1 logit margin is below
  the small model's q-quantile margin (the least confident share q) are run again by the full model,
  whose token replaces theirs. q = 0 never escalates; q = 1 escalates everything.

Rows on the Pareto frontier (no other row is both faster and at least as accurate) are marked.
The weights are drawn from a seed (the kit's ``build_decoder``, with an untied random LM head so the
prediction depends on every block), not trained: the curve shows the method, not a model's accuracy.

Run: python ch17/latency_accuracy_sweep.py [--requests 256 --prompt 128 --draft 2] [--plot sweep.png]
     python ch17/latency_accuracy_sweep.py --tiny --device cpu   (seconds on a CPU)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from ch17_pareto import Point, pareto, plot, table
from ch17_serving import MODEL
from rich.console import Console

from aisp.harness.timing import time_call
from aisp.kits.llm import Decoder, LLMConfig, build_decoder
from aisp.kits.llm.serving import dtype_on

TINY = LLMConfig(vocab=256, dim=64, layers=4, heads=4, kv_heads=2, ffn=128)


@dataclass(frozen=True)
class SweepConfig:
    model: LLMConfig = MODEL
    requests: int = 256
    """Requests (sequences of ``prompt`` tokens) whose next token is predicted together."""
    prompt: int = 128
    draft: int = 2
    """Blocks of the cascade's small model."""
    quantiles: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5, 0.75)
    """Shares of the least confident requests the cascade escalates."""
    iterations: int = 10
    seed: int = 0


def truncated(model: Decoder, layers: int) -> Decoder:
    """The first ``layers`` blocks of ``model`` with its embedding, final norm and head (shared, not copied)."""
    with torch.device("meta"):
        sub = Decoder(replace(model.cfg, layers=layers))
    sub.embed, sub.norm, sub.head = model.embed, model.norm, model.head
    sub.blocks = torch.nn.ModuleList(model.blocks[:layers])
    return sub


def next_token(model: Decoder, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy next token per request and its top-1 minus top-2 logit margin (fp32)."""
    positions = torch.arange(tokens.shape[1], device=tokens.device).expand_as(tokens)
    top = model.head(model.hidden(tokens, positions)[:, -1]).float().topk(2, dim=-1)
    return top.indices[:, 0], top.values[:, 0] - top.values[:, 1]


def cascade(small: Decoder, full: Decoder, tokens: torch.Tensor, threshold: float) -> torch.Tensor:
    """Tokens from ``small`` where its margin reaches ``threshold``, else from ``full`` (on those rows only)."""
    token, margin = next_token(small, tokens)
    unsure = margin < threshold
    if unsure.any():  # a host sync: the escalated batch's size
        token = token.clone()
        token[unsure] = next_token(full, tokens[unsure])[0]
    return token


def sweep(cfg: SweepConfig, device: torch.device) -> list[Point]:
    """Every early exit and every cascade quantile, timed (median of ``iterations`` calls)."""
    full = build_decoder(cfg.model, cfg.seed, device, dtype_on(device))
    gen = torch.Generator(device=device).manual_seed(cfg.seed + 1)
    full.head.weight.normal_(0.0, cfg.model.dim ** -0.5, generator=gen)  # untied: the kit's lets layer 1 predict
    tokens = torch.randint(cfg.model.vocab, (cfg.requests, cfg.prompt), generator=gen, device=device)

    def timed(fn: Callable[[], torch.Tensor]) -> tuple[float, torch.Tensor]:
        fn()
        samples = [time_call(fn, device) for _ in range(cfg.iterations)]
        return float(torch.tensor([s.ms for s in samples]).median()), samples[-1].output

    truth = next_token(full, tokens)[0]
    points = []
    for layers in range(1, cfg.model.layers + 1):
        sub = truncated(full, layers)
        ms, token = timed(lambda m=sub: next_token(m, tokens)[0])
        points.append(Point("full" if layers == cfg.model.layers else f"exit@{layers}", ms, (token == truth).float().mean().item()))
    small = truncated(full, cfg.draft)
    margins = next_token(small, tokens)[1]
    for q in cfg.quantiles:
        threshold = float(margins.quantile(q)) if q > 0 else float("-inf")
        ms, token = timed(lambda t=threshold: cascade(small, full, tokens, t))
        points.append(Point(f"cascade@{cfg.draft}>{q:g}", ms, (token == truth).float().mean().item(),
                            (margins < threshold).float().mean().item()))
    return pareto(points)


def main(argv: list[str] | None = None) -> list[Point]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, default, text in (("--requests", 256, "requests per measured point"),
                                ("--prompt", 128, "prompt length in tokens"),
                                ("--draft", 2, "blocks of the truncated draft model in the cascade"),
                                ("--iterations", 10, "timed calls per point"), ("--seed", 0, "seed of weights and prompts")):
        p.add_argument(flag, type=int, default=default, help=text)
    p.add_argument("--tiny", action="store_true", help="a tiny 4-block decoder (CPU-friendly)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="where the decoder runs (default: cuda when present)")
    p.add_argument("--plot", type=Path, default=None, help="write the latency/agreement plot here (matplotlib)")
    a = p.parse_args(argv)
    cfg = SweepConfig(model=TINY if a.tiny else MODEL, requests=a.requests, prompt=a.prompt, draft=a.draft,
                      iterations=a.iterations, seed=a.seed)
    points = sweep(cfg, torch.device(a.device))
    Console().print(table(points, f"{cfg.requests} requests x {cfg.prompt} tokens, {cfg.model.layers} blocks, {a.device}"))
    if a.plot is not None:
        plot(points, a.plot)
    return points


if __name__ == "__main__":
    main()
