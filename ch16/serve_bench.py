"""Serving benchmark: drive the kit's continuous batcher with a timed request stream and print the
latency/throughput table (p50/p99 TTFT and TPOT, output tokens/s, goodput against an SLO).

Requests arrive by a Poisson clock (``--rate``; 0: all at once) and wait for a free slot; after every
prefill and decode step the GPU is synchronized and each request that got a token is stamped: TTFT
includes queueing, TPOT the prefills that interleave with decoding.

Run: python ch16/serve_bench.py --requests 64 --rate 20 --slots 16 [--paged] [--plot serve.png]
     python ch16/serve_bench.py --tiny --device cpu        (a tiny decoder; seconds on a CPU)
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from ch16_decode import MODEL, dtype_on

from aisp.kits import llm
from aisp.kits.llm import SLO, LLMConfig, RequestTimes, StreamConfig

TINY = LLMConfig(vocab=256, dim=64, layers=2, heads=4, kv_heads=2, ffn=128)


@dataclass(frozen=True)
class ServeConfig:
    model: LLMConfig = MODEL
    """The decoder served."""
    stream: StreamConfig = field(default_factory=StreamConfig)
    """Requests, their lengths and arrival rate."""
    slots: int = 16
    """Decode rows (concurrent requests)."""
    paged: bool = False
    """A paged KV cache (16-token pages) instead of a max-length reservation per slot."""
    slo: SLO = field(default_factory=SLO)
    """Latency targets for goodput."""
    seed: int = 0
    """Weights and the stream."""


class ArrivalBatcher(llm.ContinuousBatcher):
    """Admits a request only after its arrival (seconds since ``start``); sleeps while idle."""

    start = 0.0

    def _admit(self, waiting: list[llm.Request], out: llm.Generated) -> list[llm.Request]:
        now = time.perf_counter() - self.start
        arrived = next((i for i, r in enumerate(waiting) if r.arrival > now), len(waiting))
        if not arrived and not any(self.held):
            time.sleep(max(0.0, waiting[0].arrival - now))
            return waiting
        return super()._admit(waiting[:arrived], out) + waiting[arrived:]


def make_batcher(cfg: ServeConfig, device: torch.device) -> ArrivalBatcher:
    model = llm.build_decoder(cfg.model, cfg.seed, device)
    longest = cfg.stream.max_prompt + cfg.stream.max_output
    if not cfg.paged:
        return ArrivalBatcher(model, llm.DenseKVCache(cfg.model, cfg.slots, longest, device, dtype_on(device)), cfg.slots)
    width = llm.pages_for(longest, 16)
    layout = llm.PageLayout(pages=1 + cfg.slots * width, page_size=16, rows=cfg.slots, max_pages=width)
    cache = llm.PagedKVCache(cfg.model, layout, device, dtype_on(device))
    return ArrivalBatcher(model, cache, cfg.slots, llm.PagePool(layout.pages))


def serve(cfg: ServeConfig, device: torch.device) -> tuple[dict[str, float], list[RequestTimes]]:
    """Serves the stream once (after a two-request warm-up); the summary and every request's times."""
    batcher, requests = make_batcher(cfg, device), llm.request_stream(cfg.stream, cfg.seed)
    batcher.run([replace(r, rid=i, arrival=0.0) for i, r in enumerate(requests[:2])])  # warm-up, untimed
    times: list[RequestTimes] = []

    def stamp(rids: list[int]) -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        now = time.perf_counter()
        for rid in rids:
            times[rid].token(now)

    batcher.on_tokens = stamp
    batcher.start = time.perf_counter()
    times.extend(RequestTimes(batcher.start + r.arrival) for r in requests)
    batcher.run(requests)
    return llm.summarize(times, cfg.slo), times


def table(summary: dict[str, float]) -> str:
    s = summary
    return "\n".join([f"TTFT p50 / p99 (ms)          {s['ttft_p50_ms']:.1f} / {s['ttft_p99_ms']:.1f}",
                      f"TPOT p50 / p99 (ms)          {s['tpot_p50_ms']:.2f} / {s['tpot_p99_ms']:.2f}",
                      f"output tokens/s              {s['tokens_per_s']:.0f}",
                      f"goodput (share meeting SLO)  {s['goodput']:.2f}",
                      f"good requests/s              {s['good_requests_per_s']:.2f}"])


def plot(times: list[RequestTimes], path: Path) -> None:
    """TTFT and TPOT of every request against its arrival (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = min(t.arrival for t in times)
    arrivals = [t.arrival - start for t in times]
    fig, axes = plt.subplots(2, 1, sharex=True, figsize=(7, 5))
    for ax, label, values in zip(axes, ("TTFT (ms)", "TPOT (ms)"), ([t.ttft for t in times], [t.tpot for t in times]),
                                 strict=True):
        ax.scatter(arrivals, [v * 1e3 for v in values], s=8)
        ax.set_ylabel(label)
    axes[1].set_xlabel("arrival (s)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    print(f"plot: {path}")


def config_from(argv: list[str] | None = None) -> tuple[ServeConfig, str, Path | None]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, default, text in [("--requests", 64, "requests in the stream"), ("--slots", 16, "requests decoded together (KV-cache rows)"),
                                ("--prompt-mean", 256, "mean prompt tokens"), ("--output-mean", 64, "mean output tokens"),
                                ("--rate", 20.0, "arrivals per second (0: all at once)"), ("--ttft-slo-ms", 1000.0,
                                 "time-to-first-token objective (ms)"), ("--tpot-slo-ms", 50.0, "time-per-output-token objective (ms)")]:
        p.add_argument(flag, type=type(default), default=default, help=text)
    p.add_argument("--paged", action="store_true", help="a paged KV cache instead of one dense slot per request")
    p.add_argument("--tiny", action="store_true", help="a tiny decoder (CPU-friendly)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="default: cuda when present")
    p.add_argument("--plot", type=Path, default=None, help="write the TTFT/TPOT plot here (matplotlib)")
    a = p.parse_args(argv)
    model = TINY if a.tiny else MODEL
    stream = StreamConfig(requests=a.requests, prompt_mean=a.prompt_mean, output_mean=a.output_mean,
                          max_prompt=4 * a.prompt_mean, max_output=4 * a.output_mean, rate=a.rate, vocab=model.vocab)
    return ServeConfig(model=model, stream=stream, slots=a.slots, paged=a.paged,
                       slo=SLO(ttft_s=a.ttft_slo_ms / 1e3, tpot_s=a.tpot_slo_ms / 1e3)), a.device, a.plot


def main(argv: list[str] | None = None) -> None:
    cfg, device, plot_path = config_from(argv)
    summary, times = serve(cfg, torch.device(device))
    print(f"{cfg.stream.requests} requests at {cfg.stream.rate:g}/s, {cfg.slots} slots, "
          f"{'paged' if cfg.paged else 'dense'} KV cache, on {device}")
    print(table(summary))
    if plot_path is not None:
        plot(times, plot_path)  # prints where it wrote


if __name__ == "__main__":
    main()
