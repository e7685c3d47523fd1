"""Optimized prefill/decode priority: decode steps on a high-priority stream, the prefill chunked on a low-priority one.

Baseline (baseline_prefill_decode_priority.py): the 32,768-token prefill and the decode steps share
one stream, so the decode steps issued after it wait for all of it.
Optimized: two streams, made at setup: decode (``torch.cuda.Stream(priority=-1)``, the highest a
PyTorch stream gets) and prefill (priority 0). From the arrival on, each iteration issues the next
2,048-token prefill chunk on the prefill stream, then the decode step on the decode stream: the
GPU runs both at once, and each SM slot a prefill block frees goes to a waiting decode block first.
Chunking keeps each prefill kernel short (a causal attention block over 2,048 queries, not 32,768)
and lets the host issue the decode step after one chunk's launches instead of the whole prefill's.
The decode rows and the long request's row are different cache rows, so the streams share no data
beyond the cache's allocation (ordered once, after ``start()``). Both streams wait for the caller's
stream at the start and the caller's stream waits for both at the end: the harness's events see all
the work. On a CPU the streams are absent and the same code runs in order.
Expect (measured, H200, 2026-11-27): p99 decode gap 40.67 -> 8.26 ms, 4.92x, the best variant; call
time 146.1 -> 167.8 ms (+15%). Earlier (2026-11-26): 42.1 -> 15.04 ms, 2.80x (estimated 5-8 ms,
4-6x), priority adding nothing over chunking (``_chunked``: 13.41 ms); call 155.5 -> 197.2 ms (+27%,
estimated within ~15%); p50 gap 3.53 -> 7.62 ms (a chunk runs beside every step).
Run: python ch17/optimized_prefill_decode_priority.py  |  aisp bench run -t ch17:prefill_decode_priority
"""

from __future__ import annotations

import torch
from baseline_prefill_decode_priority import SharedStream
from ch17_serving import on_stream

import aisp


class PriorityStreams(SharedStream):
    chunked = True
    """Prefill in ``workload.chunk``-token chunks, one beside each decode step (else whole, at arrival)."""
    prioritized = True
    """Decode on a high-priority stream, prefill on a low-priority one (else both on the caller's)."""

    def setup(self) -> None:
        super().setup()
        self.decode_stream = self.prefill_stream = None
        if self.device.type == "cuda" and self.prioritized:
            self.decode_stream = torch.cuda.Stream(self.device, priority=-1)
            self.prefill_stream = torch.cuda.Stream(self.device, priority=0)

    def run(self) -> tuple[torch.Tensor, ...]:
        w = self.workload
        chunk = w.chunk if self.chunked else w.long
        caller = torch.cuda.current_stream(self.device) if self.decode_stream is not None else None
        for stream in (self.decode_stream, self.prefill_stream) if caller is not None else ():
            stream.wait_stream(caller)
        with on_stream(self.decode_stream):
            cache, steps = self.start()
            positions = torch.full((w.running,), w.context, device=self.device)
        if caller is not None:
            self.prefill_stream.wait_stream(self.decode_stream)  # the cache exists (zeroed) before chunks write it
        first = None
        for s in range(1, w.steps):
            start = (s - w.arrive) * chunk
            if 0 <= start < w.long:
                with on_stream(self.prefill_stream):
                    first = self.prefill_long(cache, start, start + chunk) or first
            with on_stream(self.decode_stream):
                self.decode_step(cache, steps, positions, s)
                positions = positions + 1
        if caller is not None:
            caller.wait_stream(self.decode_stream)
            caller.wait_stream(self.prefill_stream)
        return self.outputs(steps, first)


def get_benchmark() -> aisp.Benchmark:
    return PriorityStreams()


if __name__ == "__main__":
    aisp.main(get_benchmark)
