"""Optimized GEMM epilogue, CUTLASS ping-pong variant: the GELU epilogue hidden behind the other warpgroup's math.

Baseline (baseline_gemm_epilogue.py): Linear (GEMM + bias), then a GELU kernel that reads and
rewrites the 512 MiB output: 1 GiB of extra HBM traffic and one more launch.
Optimized: cutlass_gelu.cu, one CUTLASS 3.x sm90 kernel, ``KernelTmaWarpSpecializedPingpong`` with
the ``LinCombPerColBiasEltAct<GELU_taylor>`` epilogue (bias add and tanh GELU on the fp32
accumulators, one bf16 TMA store). cuBLASLt's GELU_BIAS kernel (optimized_gemm_epilogue.py) is
cooperative: both consumer warpgroups share a 192 x 192 tile and then both run its epilogue, so
with K = 1,024 (16 k-steps a tile) the tensor cores idle through every tile's GELU and store
(ncu: 849 us at tensor pipe 72% against the plain bias GEMM's 764 us at 83%). In ping-pong each
consumer warpgroup owns a whole 128 x 128 tile and they alternate: one runs its mainloop while the
other runs its epilogue, so the GELU (~1,000 instructions a thread a tile) and the store overlap
the other's wgmma. 128 x 128 tiles also divide N = 4,096 (192 overruns it by 3%). 2 x 1 cluster,
6-stage TMA ring, persistent scheduler; 168 registers, no spills (sm_90a build, cuobjdump).
Expect: not yet measured. Estimate (arithmetic, not a measurement): if the epilogue hides fully,
the kernel runs at the plain bias GEMM's pace less the 3% tile overrun: 0.74-0.80 ms, 88-95% of the
783 TFLOP/s bf16 rate; at worst (128 x 128 tiles feeding the tensor cores less well than 192 x
192) no faster than cuBLASLt's, where the harness keeps the measured variant. Needs the CUTLASS
headers (nvidia-cutlass wheel or CUTLASS_DIR; the first call builds the kernel, ~40 s of nvcc).
Run: python ch09/optimized_gemm_epilogue_cutlass.py  |  aisp bench run -t ch09:gemm_epilogue
"""

from __future__ import annotations

import ctypes
import dataclasses

import ch09_native
import torch
from baseline_gemm_epilogue import WORKLOAD, LinearThenGelu

import aisp
from aisp.kits import native

LIBRARY = ch09_native.cutlass_library("cutlass_gelu.cu", hopper_only=True)
WORKSPACE_BYTES = 1 << 20
"""Enough for the persistent tile scheduler's workspace (the entry point returns 2 if not)."""
INT, PTR = ctypes.c_int, ctypes.c_void_p


class CutlassPingpongGelu(LinearThenGelu):
    workload = dataclasses.replace(WORKLOAD, requires=ch09_native.cutlass_requirements(), timeout_s=900.0)
    scratch = ("y", "workspace")

    def setup(self) -> None:
        super().setup()
        s, dev = self.workload, self.device
        self.lib = LIBRARY.load(dev, {"cutlass_gelu_gemm": [PTR, PTR, PTR, PTR, INT, INT, INT, PTR, ctypes.c_size_t,
                                                            PTR]})
        if not self.lib.cutlass_headers():
            raise RuntimeError(f"{LIBRARY.name} was built without the CUTLASS headers: {ch09_native.CUTLASS_HINT}")
        self.y = torch.empty(s.tokens, s.d_out, device=dev, dtype=torch.bfloat16)
        self.workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=dev)

    def run(self) -> torch.Tensor:
        s = self.workload
        status = self.lib.cutlass_gelu_gemm(self.x.data_ptr(), self.w.data_ptr(), self.b.data_ptr(),
                                            self.y.data_ptr(), s.tokens, s.d_out, s.d_in, self.workspace.data_ptr(),
                                            WORKSPACE_BYTES, native.stream(self.device))
        native.check(status, "cutlass_gelu_gemm (1 cannot implement, 2 workspace, 3 initialize, 4 run)")
        return self.y


def get_benchmark() -> aisp.Benchmark:
    return CutlassPingpongGelu()


if __name__ == "__main__":
    aisp.main(get_benchmark)
