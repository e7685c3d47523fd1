"""What the serving chapters' pairs share on top of the kit: the device's compute dtype, the bytes a
decode step reads, a clock of the gaps between decode steps, and the scene where a long prompt
arrives while requests are decoding (ch15:chunked_prefill, ch17:prefill_decode_priority): its
workload, inputs, the running requests' prefill and the gap metrics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from aisp.harness.benchmark import Benchmark, Workload
from aisp.kits.llm.cache import DenseKVCache
from aisp.kits.llm.config import LLMConfig
from aisp.kits.llm.engine import TOP, prefill
from aisp.kits.llm.model import build_decoder
from aisp.kits.llm.sampling import greedy_top


def dtype_on(device: torch.device) -> torch.dtype:
    """bf16 on a GPU, fp32 on a CPU (the tests)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def weight_bytes(cfg: LLMConfig, itemsize: float = 2.0) -> float:
    """Bytes of weights one forward reads (the embedding only for its rows: excluded)."""
    return itemsize * (cfg.params() - cfg.vocab * cfg.dim)


class StepClock:
    """Times between decode steps without waiting for the GPU: a CUDA event per step recorded on the
    current stream (the one the decode step was issued on; read after the run), or the host clock
    on a CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.marks: list = []

    def tick(self) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def gaps_ms(self) -> list[float]:
        if self.cuda:
            torch.cuda.synchronize()
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:], strict=False)]
        return [(b - a) * 1e3 for a, b in zip(self.marks, self.marks[1:], strict=False)]

    def summary(self) -> dict[str, float]:
        """Largest, p99 and median gap between consecutive decode steps (ms)."""
        gaps = torch.tensor(self.gaps_ms(), dtype=torch.float64)
        if not gaps.numel():
            return {}
        return {"decode_gap_max_ms": float(gaps.max()), "decode_gap_p99_ms": float(gaps.quantile(0.99)),
                "decode_gap_p50_ms": float(gaps.median())}


@dataclass(frozen=True, kw_only=True)
class LongPromptWorkload(Workload):
    model: LLMConfig = LLMConfig()
    """The decoder."""
    running: int = 16
    """Requests decoding when the long prompt arrives."""
    context: int = 1024
    """Prompt tokens of each running request."""
    steps: int = 32
    """Tokens each running request generates (the first from its prefill)."""
    long: int = 32768
    """Prompt tokens of the arriving request (a multiple of ``chunk``)."""
    arrive: int = 4
    """Decode step before which the long prompt arrives."""
    chunk: int = 2048
    """Prefill chunk (tokens)."""

    def accounting(self) -> dict[str, Any]:
        """Workload fields of one call: the running prefills, the long prefill and the decode steps'
        FLOPs, the bf16 weights each decode step reads, tokens; headline: the p99 decode gap."""
        assert self.long % self.chunk == 0 and self.arrive + self.long // self.chunk <= self.steps
        m = self.model
        flops = (m.prefill_flops(self.running * self.context, self.context / 2, self.running)
                 + m.prefill_flops(self.long, self.long / 2)
                 + m.forward_flops(self.running * (self.steps - 1), self.context + self.steps / 2))
        return dict(flops=flops, bytes=(self.steps - 1) * weight_bytes(m), items=self.running * self.steps,
                    item_unit="tokens", precision="bf16", headline="metric:decode_gap_p99_ms")


class LongPromptArrival(Benchmark):
    """Draws the decoder (``draw_on_device``: see :func:`build_decoder`), the running requests'
    ``prompts`` (running, context) and the ``long_prompt`` (long,); ``start()`` prefills the running
    requests; ``metrics()`` are the clock's decode gaps. Subclasses write ``run()``."""

    workload: LongPromptWorkload
    inputs = ("prompts", "long_prompt")
    draw_on_device = False

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.model = build_decoder(w.model, self.seed, self.device, dtype_on(self.device),
                                   draw_on_device=self.draw_on_device)
        self.prompts = torch.randint(w.model.vocab, (w.running, w.context), generator=gen, device=self.device)
        self.long_prompt = torch.randint(w.model.vocab, (w.long,), generator=gen, device=self.device)
        self.clock = StepClock(self.device)

    def start(self) -> tuple[DenseKVCache, list[tuple[torch.Tensor, torch.Tensor]]]:
        """A cache with the running requests prefilled (rows 0..running-1; the long one: the last row)
        and their first tokens and top logits."""
        w = self.workload
        cache = DenseKVCache(w.model, w.running + 1, max(w.context + w.steps, w.long), self.device,
                             dtype_on(self.device))
        self.clock = StepClock(self.device)
        steps = [greedy_top(prefill(self.model, cache, list(self.prompts)), TOP)]
        self.clock.tick()
        return cache, steps

    @staticmethod
    def outputs(steps: list[tuple[torch.Tensor, torch.Tensor]], first: tuple[torch.Tensor, torch.Tensor]
                ) -> tuple[torch.Tensor, ...]:
        """What ``run()`` returns: the running requests' tokens (running, steps) and top logits
        (running, steps, TOP), and the long request's first token and top logits."""
        return torch.stack([t for t, _ in steps], 1), torch.stack([v for _, v in steps], 1), *first

    def metrics(self) -> dict[str, float]:
        return self.clock.summary()
