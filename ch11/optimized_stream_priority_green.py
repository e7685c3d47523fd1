"""Optimized stream priority, green-context variant: the chain gets SMs of its own (a green context
of 16 SMs), the bulk the other ~116, each job on a stream of its own green context.

Baseline (baseline_stream_priority.py): the chain of 64 small dependent kernels on a stream of the
bulk's priority waits behind each bulk pass: its latency ~ bulk + chain.
Optimized: optimized_stream_priority_pdl.py's chain (high priority, each kernel launched with PDL)
and the same bulk passes (torch.mul), but on streams of two green contexts (ch11/green_contexts.cu:
cuDevSmResourceSplitByCount, cuGreenCtxCreate, cuGreenCtxStreamCreate) that split the SMs: at least
16 for the chain, the remainder for the bulk. Priority orders pending blocks but shares the SMs:
the profile (ceiling_note) shows each chain kernel running 39.3 us beside the bulk against ~36 us a
step alone, with bulk warps issuing on its SMs and each step's blocks waiting for slots bulk blocks
free. A partition removes both: no bulk block is ever placed on the chain's SMs, so its kernels run
as on an idle GPU (PDL keeps the next kernel resident there). Same kernels, same launches, same
output; the bulk, HBM-bound, loses ~12% of its SMs but still ends well before the chain.
The caller's stream and the green streams are joined in CUDA C++ (green_fork, green_join): an
event is recorded only on a stream of its own context, as cuEventRecord requires.
Expect: measured (H200, 2026-11-29, two runs of 20 samples): 2.491 / 2.486 ms against the PDL
variant's 2.612 / 2.615 in the same runs (1.05x), 79% of the 1.965 ms ceiling (estimated 2.30-2.40
ms, 82-85%): green contexts work in the sandbox and the chain no longer waits behind bulk passes, but
a step costs ~3 us over the chain alone with PDL (2.297 ms, 64 steps).
Run: python ch11/optimized_stream_priority_green.py  |  aisp bench run -t ch11:stream_priority
"""

from __future__ import annotations

import ctypes

import torch
from ch11_common import INT, PTR, load_green
from optimized_stream_priority_pdl import HighPriorityDependentLaunch

import aisp
from aisp.kits import native


class SmPartition(HighPriorityDependentLaunch):
    """The PDL chain on a high-priority stream of a green context of its own; the bulk on the rest."""

    chain_sms = 16
    """SMs asked for the chain's green context (sm_90: at least 8, a multiple of 8; the driver may
    round up). The chain's 8 blocks and the next kernel's 8 (PDL) fit one an SM."""

    def setup(self) -> None:
        super().setup()
        self.green = load_green(self.device)
        streams, sms = (PTR * 2)(), (INT * 2)()
        with torch.cuda.device(self.device):
            native.check(self.green.green_init(self.chain_sms, self.priority, streams, sms), "green_init")
        self.chain_stream = torch.cuda.ExternalStream(streams[0], device=self.device)
        self.bulk_stream = torch.cuda.ExternalStream(streams[1], device=self.device)
        self.sms = (sms[0], sms[1])

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        caller = PTR(torch.cuda.current_stream(self.device).cuda_stream)
        native.check(self.green.green_fork(caller), "green_fork")
        with torch.cuda.stream(self.bulk_stream):
            bulk = self.bulk()
        chain = self.chain(self.chain_stream)
        native.check(self.green.green_join(caller), "green_join")
        return bulk, chain

    def chain_latency_ms(self) -> float:
        ms = ctypes.c_float()
        native.check(self.green.green_chain_ms(ctypes.byref(ms)), "green_chain_ms")
        return ms.value

    def metrics(self) -> dict[str, float]:
        """The parent's figures, and the SMs each green context got."""
        return {**super().metrics(), "chain_sms": float(self.sms[0]), "bulk_sms": float(self.sms[1])}


def get_benchmark() -> aisp.Benchmark:
    return SmPartition()


if __name__ == "__main__":
    aisp.main(get_benchmark)
