"""Baseline stream-ordered allocator: a step loop that cudaMallocs and cudaFrees its workspace
every step (CUDA C++).

Baseline: stream_ordered.cu ``alloc_run`` mode 0: 64 steps over (64, 2M) fp32 inputs; each step
allocates an 8 MiB workspace with ``cudaMalloc``, runs two kernels through it
(tmp = 2x + 1; out = tmp^2 - x) and releases it with ``cudaFree``. cudaFree waits until the device
is idle, so the host cannot queue the next step while this one runs: every step pays the driver's
allocation, a full drain of the GPU and the launch latency of the next kernel on an idle GPU. (A
PyTorch program never sees this: its caching allocator keeps freed blocks; plain CUDA C++ code,
a custom op or a library with its own buffers does.)
Optimized (optimized_stream_ordered_allocator.py): the same loop with ``cudaMallocFromPoolAsync`` /
``cudaFreeAsync`` on the stream, from a pool whose release threshold keeps freed memory: no
synchronization, the host runs ahead, the kernels run back to back.
Bytes declared: x read and out written once, 1 GiB (the two kernels move 2.5 GiB: the workspace
is written and read and x read twice, the same in both variants).
Expect: 5.14x [5.06, 5.23] measured on an H200 (5.62 -> 1.10 ms; the optimized
moves its 2.5 GiB at 2.45 TB/s, 58% of the HBM copy ceiling).
Run: python ch11/baseline_stream_ordered_allocator.py  |  aisp bench run -t ch11:stream_ordered_allocator
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import torch

import aisp
from aisp.kits import native

HERE = Path(__file__).resolve().parent
LIBRARY = native.Library((HERE / "stream_ordered.cu",))
INT, PTR = ctypes.c_int, ctypes.c_void_p


@dataclass(frozen=True, kw_only=True)
class AllocWorkload(aisp.Workload):
    steps: int = 64
    n: int = 2 * 2**20
    """Floats per step (input, workspace and output each)."""


def _workload() -> AllocWorkload:
    s = AllocWorkload()
    return AllocWorkload(bytes=2 * 4.0 * s.steps * s.n, flops=4.0 * s.steps * s.n, items=s.steps,
                         item_unit="steps", precision="fp32", requires=native.REQUIRES,
                         ceiling_note="profiled: 128 kernels are 0.90 ms of the 1.1 ms call; in them long_scoreboard 38-42 warps/issue, DRAM 24-42%, part of the workspace in L2",
                         window="idle")


WORKLOAD = _workload()


class MallocPerStep(aisp.Benchmark):
    """out[i] = (2 x[i] + 1)^2 - x[i] per step, through a workspace allocated for the step."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("out",)
    mode = 0
    """alloc_run's mode: 0 cudaMalloc/cudaFree, 1 stream-ordered pool."""

    def setup(self) -> None:
        w = self.workload
        self.lib = LIBRARY.load(self.device)
        self.lib.alloc_run.argtypes = [INT, PTR, PTR, INT, INT, PTR]
        if self.mode == 1:
            native.check(self.lib.pool_init(), "pool_init")
        self.x = torch.randn(w.steps, w.n, device=self.device, generator=self.generator())
        self.out = torch.empty_like(self.x)

    def run(self) -> torch.Tensor:
        w = self.workload
        status = self.lib.alloc_run(self.mode, self.x.data_ptr(), self.out.data_ptr(), w.steps, w.n,
                                    native.stream(self.device))
        native.check(status, f"alloc_run(mode={self.mode})")
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return MallocPerStep()


if __name__ == "__main__":
    aisp.main(get_benchmark)
