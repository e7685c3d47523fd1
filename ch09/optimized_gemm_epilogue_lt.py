"""Optimized GEMM epilogue, cuBLASLt variant: the GELU_BIAS epilogue with the algorithm timed, not guessed.

Baseline (baseline_gemm_epilogue.py): Linear (GEMM + bias), then a GELU kernel that reads and
rewrites the 512 MiB output: 1 GiB of extra HBM traffic and one more launch.
Optimized: the same fused kernel as optimized_gemm_epilogue.py (cuBLASLt, epilogue GELU_BIAS: bias
and tanh GELU on the fp32 accumulators, one bf16 store), called directly (cublaslt_epilogue.cu).
torch takes the heuristic's first algorithm, on the H200 a 192 x 192 cooperative nvjet kernel
whose tiles overrun N = 4,096 by 3% and whose GELU epilogue (K = 1,024: 16 k-steps a tile) does not
overlap the next tile's mainloop, costing it 11% against the plain bias GEMM (ncu). setup() asks
the heuristic for up to 16 candidates, checks each against torch._addmm_activation and times it
(3 interleaved rounds of 3 calls, the best round), and keeps the fastest: a one-off choice, as
cuDNN's benchmark mode makes; the timed call is the whole GEMM + bias + GELU with that algorithm.
Candidate 0 is torch's own choice, so the pick is no slower than it beyond timing noise.
Expect: measured (one H200 of a 2 x H200 host, 2026-11-30, whole-book run, 20 samples at the power
cap): 0.8308 ms, 662 TFLOP/s = 84.5% of the bf16 rate, 1.30x [1.28, 1.32]; faster than torch's own
call of the same epilogue (0.8760 ms, 80.2%) and slower than the CUTLASS ping-pong variant (0.7636
ms), the pair's best. The estimate was 0.80-0.85 ms. A second book: 0.8199 ms (torch 0.8651).
Run: python ch09/optimized_gemm_epilogue_lt.py  |  aisp bench run -t ch09:gemm_epilogue
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import ch09_native
import torch
from baseline_gemm_epilogue import LinearThenGelu

import aisp
from aisp.kits import native

LIBRARY = native.Library((ch09_native.HERE / "cublaslt_epilogue.cu",), flags=ch09_native.cublaslt_flags())
"""cublaslt_epilogue.cu linked with cuBLASLt (the CUDA toolkit's or the nvidia-cublas wheel's)."""
WORKSPACE_BYTES = 32 << 20
CANDIDATES = 16
ROUNDS, CALLS = 3, 3
BOUND = 1e-2
"""Relative L2 error a candidate may show against torch._addmm_activation (bf16 rounding is ~4e-3)."""
INT, PTR = ctypes.c_int, ctypes.c_void_p


def fastest(times: Sequence[Sequence[float] | None]) -> int:
    """The candidate whose best timed round is shortest; None marks a candidate that failed (an
    error status or a wrong answer). Ties go to the earlier (the heuristic's preferred) candidate."""
    best = [(min(t), i) for i, t in enumerate(times) if t]
    if not best:
        raise RuntimeError("no cuBLASLt candidate ran correctly")
    return min(best)[1]


class LtGeluBias(LinearThenGelu):
    scratch = ("y", "workspace")

    def setup(self) -> None:
        super().setup()
        s, dev = self.workload, self.device
        self.lib = LIBRARY.load(dev, {"epi_plan": [INT, INT, INT, PTR, ctypes.c_size_t, INT, ctypes.POINTER(INT)],
                                      "epi_choose": [INT],
                                      "epi_gemm": [PTR, PTR, PTR, PTR, INT, INT, INT, PTR, PTR]})
        self.y = torch.empty(s.tokens, s.d_out, device=dev, dtype=torch.bfloat16)
        self.workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=dev)
        found = INT(0)
        native.check(self.lib.epi_plan(s.tokens, s.d_out, s.d_in, self.b.data_ptr(), WORKSPACE_BYTES, CANDIDATES,
                                       ctypes.byref(found)), "cublasLt plan (GELU_BIAS)")
        self.candidates = found.value
        self.chosen, self.times = self.tune()

    def tune(self) -> tuple[int, list[list[float] | None]]:
        """Check every candidate against torch's fused call, time the correct ones in interleaved
        rounds, select the fastest; return it and the per-round times (ms a call)."""
        want = torch._addmm_activation(self.b, self.x, self.w.t(), use_gelu=True).float()
        times: list[list[float] | None] = []
        for i in range(self.candidates):
            native.check(self.lib.epi_choose(i), "epi_choose")
            if self.call():
                times.append(None)
                continue
            error = float((self.y.float() - want).norm() / want.norm())
            times.append([] if error < BOUND else None)
        del want
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(ROUNDS):
            for i, t in enumerate(times):
                if t is None:
                    continue
                native.check(self.lib.epi_choose(i), "epi_choose")
                self.call()
                start.record()
                for _ in range(CALLS):
                    self.call()
                end.record()
                end.synchronize()
                t.append(start.elapsed_time(end) / CALLS)
        chosen = fastest(times)
        native.check(self.lib.epi_choose(chosen), "epi_choose")
        return chosen, times

    def call(self) -> int:
        s = self.workload
        return self.lib.epi_gemm(self.x.data_ptr(), self.w.data_ptr(), self.b.data_ptr(), self.y.data_ptr(),
                                 s.tokens, s.d_out, s.d_in, self.workspace.data_ptr(), native.stream(self.device))

    def run(self) -> torch.Tensor:
        native.check(self.call(), "cublasLtMatmul (GELU_BIAS)")
        return self.y

    def metrics(self) -> dict[str, float]:
        first, best = self.times[0], self.times[self.chosen]
        return {"lt_candidates": float(self.candidates), "lt_chosen": float(self.chosen),
                "lt_tuned_ms": min(best or [0.0]), "lt_first_ms": min(first or [0.0])}


def get_benchmark() -> aisp.Benchmark:
    return LtGeluBias()


if __name__ == "__main__":
    aisp.main(get_benchmark)
