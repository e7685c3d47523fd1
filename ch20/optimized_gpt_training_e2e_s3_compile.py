"""Optimized GPT training, stage 3 of 3: torch.compile (ch14: compile_modes; ch13: training_standard).

Baseline (baseline_gpt_training_e2e.py): fp32 eager GPT step. Stages 1-2 put the matmuls on bf16
tensor cores, attention in a flash kernel and AdamW in one fused kernel; the LayerNorms, GELU,
residual adds, casts and the loss still run as separate eager kernels, each reading and writing
a (8,192 x 1,024) or (8,192 x 4,096) activation, forward and backward.
Optimized: stage 2 with ``torch.compile(model)`` (default mode): AOTAutograd traces forward and
backward once; Inductor fuses those elementwise chains into a few Triton kernels and matmul
epilogues (fewer HBM round trips, far fewer launches). The fused AdamW step stays eager.
Compile time is paid in setup() and reported as ``compile_s`` (first setup in the process; later
setups reuse the compiled code).
Expect (measured, H200, 2026-11-26): 36.6 ms, 10.4x [10.2, 10.6] over the baseline, 1.29x over
stage 2, 383 TFLOP/s, MFU 38.8%; compile 16 s (estimated ~1.2x over stage 2, MFU ~43%).
Run: python ch20/optimized_gpt_training_e2e_s3_compile.py  |  aisp bench run -t ch20:gpt_training_e2e
"""

from __future__ import annotations

import time

import torch
from optimized_gpt_training_e2e_s2_fused_adamw_sdpa import FlashFusedTraining

import aisp

FIRST_COMPILE_S: list[float] = []
"""Seconds the first setup() in this process spent compiling (and running its first call)."""


class CompiledTraining(FlashFusedTraining):
    backend = "inductor"
    """The compile backend (tests on a CPU use "aot_eager": the same graphs, no C++ compile)."""

    def prepare(self) -> None:
        self.model = torch.compile(self.model, backend=self.backend)
        start = time.perf_counter()
        self.run()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        if not FIRST_COMPILE_S:
            FIRST_COMPILE_S.append(time.perf_counter() - start)

    def metrics(self) -> dict[str, float]:
        return {**super().metrics(), "compile_s": FIRST_COMPILE_S[0]}


def get_benchmark() -> aisp.Benchmark:
    return CompiledTraining()


if __name__ == "__main__":
    aisp.main(get_benchmark)
