"""Baseline occupancy API (CUDA C++): codebook dequantization with a hand-picked launch.

Baseline: out[i] = codebook[codes[i]] for 256M int16 codes and an 8,192-entry fp32 codebook
(occupancy_api.cu, ``dequantize``): each block copies the 32 KiB codebook into shared memory,
then runs a grid-stride loop. Launched the usual way, by hand: 128 threads per block and 32 blocks
per SM. The 33 KiB of shared memory per block lets only 6 blocks share an SM, so 768 of its 2,048
thread slots work (37.5% occupancy), and 4,224 blocks each load the codebook again.
Optimized (optimized_occupancy_api.py): ``cudaOccupancyMaxPotentialBlockSize`` picks the block
size with the highest occupancy for this kernel's registers and shared memory (1,024 threads,
2 blocks per SM: 100%) and the smallest grid that fills every SM. Same bytes (2 in, 4 out per
element), same answer. optimized_occupancy_api_ilp.py: the same API launch for dequantize4, 4 codes
per 8-byte load and one float4 store, 4 loads in flight per thread.
Expect (measured, H200, 2026-11-27): 0.7581 ms (2.12 TB/s, 50.6% of HBM copy) -> ILP 0.4356 ms,
1.74x [1.69, 1.78], 3.70 TB/s, 88.0% (the pair's best); the launch alone (optimized) 0.4845 ms, 1.56x,
79.2%. At the old 2^26 codes the same run gave 0.2966 -> 0.1341 ms (71.5%), ILP 0.1254 ms (76.5%):
launch, ramp-up and tail weighed more in a short call. The baseline gained most from the size (32% ->
51%), so the ratio fell; its 4,224 codebook copies are a fixed cost per call (not profiled). Earlier:
0.283 -> 0.131 ms, 2.16x, 73% (2026-11-23); a 128-bit-load kernel 0.194 ms, 49%, reverted (2026-11-26).
Run: python ch06/baseline_occupancy_api.py  |  aisp bench run -t ch06:occupancy_api
     |  python ch06/occupancy.py (registers, shared memory and blocks/SM of every ch06 kernel)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch06_common import HERE, INT, LONG, PTR

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class CodebookWorkload(aisp.Workload):
    n: int = 1 << 28
    """int16 codes to dequantize: 512 MiB in, 1 GiB out."""
    codebook: int = 8192
    """fp32 entries (32 KiB): must match kCodebook in occupancy_api.cu."""


def _workload() -> CodebookWorkload:
    s = CodebookWorkload()
    return CodebookWorkload(bytes=6.0 * s.n, items=s.n, item_unit="elements", precision="exact",
                            requires=native.REQUIRES)


WORKLOAD = _workload()
LIBRARY = native.Library((HERE / "occupancy_api.cu",))


class HandPickedDequantize(aisp.Benchmark):
    """out = codebook[codes], launched <<<32 x SMs, 128>>>."""

    workload = WORKLOAD
    inputs = ("codes",)
    scratch = ("out",)

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.lib = LIBRARY.load(self.device, {
            "dequantize_fixed": [PTR, PTR, PTR, LONG, PTR],
            "dequantize_launch": [PTR, PTR, PTR, LONG, INT, INT, PTR]})
        if self.lib.codebook_size() != w.codebook:
            raise RuntimeError("occupancy_api.cu's kCodebook differs from the workload's codebook")
        self.codes = torch.randint(0, w.codebook, (w.n,), dtype=torch.int16, device=self.device, generator=gen)
        self.codebook = torch.randn(w.codebook, device=self.device, generator=gen)
        self.out = torch.empty(w.n, device=self.device)
        self.prepare()
        torch.testing.assert_close(self.run(), self.codebook[self.codes.long()], rtol=0, atol=0)

    def prepare(self) -> None:
        """What a variant asks the runtime before its first launch."""

    def launch(self, stream: object) -> int:
        return self.lib.dequantize_fixed(self.codes.data_ptr(), self.codebook.data_ptr(), self.out.data_ptr(),
                                         self.workload.n, stream)

    def run(self) -> torch.Tensor:
        native.check(self.launch(native.stream(self.device)), type(self).__name__)
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return HandPickedDequantize()


if __name__ == "__main__":
    aisp.main(get_benchmark)
