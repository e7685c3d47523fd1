"""L2 persistence by an access-policy window (CUDA C++): measured slower on the H200, so not a pair variant.

Baseline (baseline_l2_persistence.py): random gathers from a 32 MiB table between 1 GiB of streamed
rows; LRU can let the stream evict table rows before their next use.
Optimized (this file, kept as a demonstration, not timed by the harness): a persisting-L2 set-aside of
min(32 MiB, the device maximum) (``cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize)``) and an
access-policy window over the table on the pair's stream (``cudaStreamSetAttribute`` with
``cudaStreamAttributeAccessPolicyWindow``: hitProp persisting, missProp streaming, hitRatio =
set-aside / window). The kernel and its launch are the baseline's. The limit belongs to the CUDA
context (the whole process, every stream and library in it), not to the card; the harness puts it
back before each call of any variant, so each call applies it (``l2_persist_apply``: one
``cudaDeviceGetLimit``; where it differs, a ``cudaDeviceSetLimit``; then the window). setup() makes
the first grant (``metrics()``: 32 MiB asked, 33.75 MiB granted on an H200); teardown() removes the
window, returns persisting lines to normal and the last holder restores the limit found before.
Expect (measured, 2 x H200, 2026-11-30): slower than the baseline. Run alone (own process): 0.4528 ms
median against the baseline's 0.3913 ms. In the harness, interleaved with the baseline (limit
restored before each call): 0.5315 / 0.5095 ms against 0.3554 / 0.3550 ms, 0.64x [0.57, 0.72] and
0.69x [0.66, 0.72] in two runs. Nsight Compute (2026-11-28) read its kernel L2-bound (86% busy) at
405 us: keeping the table in a set-aside did not pay for the L2 it took from the stream. A pair
variant that does not beat its baseline is not shipped (CHAPTERS.md), so the harness does not
discover this file (no ``optimized_`` prefix); the pair's optimized variant is
optimized_l2_persistence_hints.py.
Run: python ch07/l2_persistence_window.py
"""

from __future__ import annotations

import ctypes

import torch
from baseline_l2_persistence import StreamedGather

import aisp
from aisp.kits import native


class PersistingGather(StreamedGather):
    def prepare(self) -> None:
        self.carveout = ctypes.c_size_t()
        status = self.lib.l2_persist_begin(ctypes.c_void_p(self.side.cuda_stream), self.table.data_ptr(),
                                           self.table_bytes(), ctypes.byref(self.carveout))
        native.check(status, "l2_persist_begin (persisting-L2 limit and access-policy window)")
        self.holds_window = True

    def table_bytes(self) -> int:
        return self.table.numel() * self.table.element_size()

    def run(self) -> torch.Tensor:
        status = self.lib.l2_persist_apply(ctypes.c_void_p(self.side.cuda_stream), self.table.data_ptr(),
                                           self.table_bytes(), self.carveout.value)
        native.check(status, "l2_persist_apply (persisting-L2 limit and access-policy window, each call)")
        return super().run()

    def teardown(self) -> None:
        if getattr(self, "holds_window", False):
            self.holds_window = False
            native.check(self.lib.l2_persist_end(ctypes.c_void_p(self.side.cuda_stream)), "l2_persist_end")

    def metrics(self) -> dict[str, float]:
        return {"persisting_l2_mib": self.carveout.value / 2**20} if hasattr(self, "carveout") else {}


def get_benchmark() -> aisp.Benchmark:
    return PersistingGather()


if __name__ == "__main__":
    aisp.main(get_benchmark)
