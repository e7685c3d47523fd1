"""Optimized small copies, mapped: one kernel reads the 2,048 pinned host tensors over PCIe itself.

Baseline (baseline_small_copies.py): 2,048 ``copy_`` calls of 4 KiB each; per-copy overhead
(dispatch, driver call, DMA setup) dominates the 8 MiB moved.
Optimized (optimized_small_copies.py, measured): ``torch.cat`` into pinned staging, one 8 MiB copy;
the host cat (1.58 ms a call, profiled) is then the bound, the copy 160 us.
Optimized here: no host memcpy and no staging. Pinned memory is mapped into the GPU's address space
(UVA), so ``gather_pieces_mapped`` (small_copies.cu) launches one block per tensor and its threads load
16-byte words from host memory and store them into ``dst``: one launch, 8 MiB over PCIe read by the SMs.
The table of the tensors' device addresses is built in setup(), as a CUDA graph captures them: the
harness refills inputs in place and addresses keep; a caller whose tensors move rebuilds it
(``map_sources``: 0.12 ms of Python for 2,048 tensors, measured on a 2-core CPU box).
Expect: measured (H200 of a 2 x H200 host, 2026-11-30, one run of 20 samples): 0.2291 ms against the
staged variant's 2.9249 and the baseline's 20.3823 in the same run: 89.79x [83.93, 96.07], 66% of the
ceiling (8 MiB at the pinned H2D link, 0.151 ms), the pair's best. Estimated (arithmetic): chapter 2's
zero_copy kernel (the same mapped reads) ran 45 GB/s end to end on 2.7 MB; 8.4 MB at 45-50 GB/s plus ~5 us
of launch is 0.17-0.19 ms, 80-89%; measured 0.229 ms, 66% (36.6 GB/s): under the estimate. Two more runs
(2 x H200 host, 2026-11-30, 20 samples, --gpus all): 0.2293 and 0.2232 ms against the staged variant's
3.4223 and 2.9980 (baseline 14.7366, 19.9055): 68.01x [54.65, 84.65] and 77.16x [42.86, 138.93], 66.0%
and 67.8%, the pair's best in both. Why (torch profiler, H200, 2026-11-30): the one gather kernel reads
the 8 MiB over PCIe in 168.5 us (49.8 GB/s, ~90% of pinned H2D's 55 GB/s); the rest of a call from
idle is the host's issue before it (a 0.268 ms window a call under the profiler). The kernel is near
the link; the launch from idle holds the call at 66-68%. One H200, 2026-12-01: a probe read 184-186 us a call
alone and 221-231 us right after one baseline call (the L2 flushed in both); the harness, whose rotation puts a
third of the samples after the baseline, 0.2176 ms (69.6%).
Run: python ch02/optimized_small_copies_mapped.py  |  aisp bench run -t ch02:small_copies
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path

import torch
from baseline_small_copies import ManySmallCopies

import aisp
from aisp.kits import native

LIBRARY = native.Library((Path(__file__).resolve().parent / "small_copies.cu",))
INT, PTR = ctypes.c_int, ctypes.c_void_p


def source_addresses(srcs: Sequence[torch.Tensor], floats: int) -> torch.Tensor:
    """The tensors' host addresses as int64 (CPU), after checking what the kernel assumes: each one
    contiguous fp32 of ``floats`` elements on the host, 16-byte aligned, ``floats`` a multiple of 4."""
    if not srcs or floats % 4:
        raise ValueError(f"need at least one tensor and a multiple of 4 floats, got {len(srcs)} x {floats}")
    for i, t in enumerate(srcs):
        if t.device.type != "cpu" or t.dtype != torch.float32 or t.numel() != floats or not t.is_contiguous():
            raise ValueError(f"tensor {i}: {t.dtype} {tuple(t.shape)} on {t.device}, "
                             f"need {floats} contiguous fp32 on the host")
        if t.data_ptr() % 16:
            raise ValueError(f"tensor {i}: address not 16-byte aligned")
    return torch.tensor([t.data_ptr() for t in srcs], dtype=torch.int64)


class MappedGather(ManySmallCopies):
    def setup(self) -> None:
        super().setup()
        w = self.workload
        if self.dst.shape != (w.count, w.floats) or not self.dst.is_contiguous():
            raise ValueError("dst must be a contiguous count x floats buffer")
        self.lib = LIBRARY.load(self.device, {"map_pieces": [PTR, INT],
                                              "gather_pieces_mapped": [PTR, INT, INT, PTR, PTR]})
        self.map_sources()

    def map_sources(self) -> None:
        """The device table of the sources' mapped addresses (fails on memory that is not page-locked)."""
        addresses = source_addresses(self.srcs, self.workload.floats)
        if addresses.numel() != self.dst.shape[0]:
            raise ValueError(f"{addresses.numel()} tensors for {self.dst.shape[0]} rows of dst")
        native.check(self.lib.map_pieces(native.ptr(addresses), addresses.numel()), "map_pieces")
        self.table = addresses.to(self.device)
        self.mapped = (self.srcs, len(self.srcs))
        self.call = (self.table.data_ptr(), self.table.numel(), self.workload.floats)  # run()'s first arguments

    def run(self) -> torch.Tensor:
        if self.mapped[0] is not self.srcs or self.mapped[1] != len(self.srcs):  # new sources: map again
            self.map_sources()
        status = self.lib.gather_pieces_mapped(*self.call, self.dst.data_ptr(), native.stream(self.device))
        native.check(status, "gather_pieces_mapped")
        return self.dst


def get_benchmark() -> aisp.Benchmark:
    return MappedGather()


if __name__ == "__main__":
    aisp.main(get_benchmark)
