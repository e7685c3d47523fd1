"""Baseline dynamic parallelism (CUDA C++): adaptive refinement with a host round trip per level.

Adaptive Simpson integration of one sharp peak per cell (4,096 cells, widths 1e-3 to 1e-1; see
dynamic_parallelism.cu), refined level by level: each level's kernel adds converged intervals to
their cell and appends both halves of the others to the next level's list (~17 levels, 4K to
190K intervals each, in float64).
Baseline: dynamic_parallelism.cu ``dp_host``: per level, launch the level kernel (grid sized to the
level), copy the next level's count D2H, cudaStreamSynchronize, loop. ~17 round trips per call.
Optimized (optimized_dynamic_parallelism.py): ``dp_device``: one host launch; each level kernel
launches the next from the GPU (CUDA dynamic parallelism, a tail launch into
cudaStreamTailLaunch, which starts when the launching grid has finished). Built with -rdc=true
and -lcudadevrt. Same kernels, same intervals, same result (up to float64 atomic-add order).
Expect (measured, H200, 2026-11-23): 1.45x [1.40, 1.49] (0.447 -> 0.307 ms over 17 levels), below
the 2-4x first estimated.
Run: python ch12/baseline_dynamic_parallelism.py  |  aisp bench run -t ch12:dynamic_parallelism
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch
from ch12_common import DBL, INT, PTR, library

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class RefineWorkload(aisp.Workload):
    cells: int = 4096
    tol: float = 1e-7
    """Simpson tolerance per unit length."""
    max_levels: int = 20
    cap: int = 1 << 19
    """Intervals one level's list holds (the largest level of the default inputs is ~190K)."""


LEVELS = 17
"""Levels the refinement runs on the pair's inputs: set by the narrowest peaks (w near 1e-3, from the
largest |v| of 4,096 normal draws); 17 on every seed tried (tests/test_ceilings_declared.py)."""


def _workload() -> RefineWorkload:
    # Ceiling: latency. The optimized design needs one launch from the host (level 0; the count reset
    # and seeding could fold into it) and 16 dependent level kernels launched from the GPU. aisp peak
    # measures no floor for a device-side launch; each level is priced at the floor of a node of a
    # graph of empty kernels (0.53 us), the least a kernel that waits for the previous one costs:
    # 5.8 + 16 x 0.53 us, ~14 us. The intervals' bytes (~1.7 M of 24 B, read and written) fit in L2.
    return RefineWorkload(items=4096, item_unit="cells", precision="fp64", element_tol=3e-10, requires=native.REQUIRES,
                          latency=aisp.LatencyCounts(launches=1, graph_nodes=LEVELS - 1),
                          ceiling_note="~18 us per level (17): the level kernel plus a device-side tail launch, "
                                       "for which aisp peak measures no floor (not profiled)",
                          window="idle")


# element_tol: 1e-9 absolute at max |integral| ~3.1 (same kernels, the same math).
WORKLOAD = _workload()
LIBRARY = library("dynamic_parallelism", "-rdc=true", "-lcudadevrt")


class Refine(ctypes.Structure):
    """The Refine struct of dynamic_parallelism.cu, passed by value."""

    _fields_ = [("list", PTR * 2), ("count", PTR), ("out", PTR), ("u", PTR), ("v", PTR), ("cap", INT),
                ("max_levels", INT), ("device_grid", INT), ("tol", DBL)]


SIGNATURES = {"dp_host": [Refine, INT, PTR, ctypes.POINTER(INT), PTR], "dp_device": [Refine, INT, PTR]}


def peak_integrals(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Exact integral over [0, 1] of w / ((x - p)^2 + w^2), p = 0.5 + 0.5 tanh(u), w = 10^(-2 - tanh(v))."""
    p = 0.5 + 0.5 * torch.tanh(u.double())
    w = 10.0 ** (-2.0 - torch.tanh(v.double()))
    return torch.atan((1 - p) / w) + torch.atan(p / w)


def simpson_on_host(u: torch.Tensor, v: torch.Tensor, tol: float, max_levels: int) -> tuple[torch.Tensor, list[int]]:
    """dynamic_parallelism.cu's level-by-level adaptive Simpson in float64 on the CPU: every cell's
    integral, and each level's interval count. The same rule accepts and splits the same intervals,
    so it also misses what the rule misses: a peak narrower than the spacing of an interval's five
    samples can read as converged (about 1 cell in 18,000 with these inputs, off by up to ~3.1)."""
    u, v = u.double().cpu(), v.double().cpu()
    p, w = 0.5 + 0.5 * torch.tanh(u), 10.0 ** (-2.0 - torch.tanh(v))
    cell = torch.arange(len(u))
    a, b = torch.zeros(len(u), dtype=torch.float64), torch.ones(len(u), dtype=torch.float64)
    out, sizes = torch.zeros(len(u), dtype=torch.float64), []
    while len(cell):
        sizes.append(len(cell))
        pc, wc = p[cell], w[cell]

        def f(x: torch.Tensor, pc: torch.Tensor = pc, wc: torch.Tensor = wc) -> torch.Tensor:
            return wc / ((x - pc) ** 2 + wc**2)

        m, h = (a + b) / 2, b - a
        whole = h / 6 * (f(a) + 4 * f(m) + f(b))
        halves = h / 12 * (f(a) + 4 * f((a + m) / 2) + 2 * f(m) + 4 * f((m + b) / 2) + f(b))
        done = ((halves - whole).abs() <= 15 * tol * h) | (len(sizes) >= max_levels)
        out.index_add_(0, cell[done], (halves + (halves - whole) / 15)[done])
        keep = ~done
        cell, a, b = cell[keep].repeat(2), torch.cat([a[keep], m[keep]]), torch.cat([m[keep], b[keep]])
    return out, sizes


def check_refinement(got: torch.Tensor, u: torch.Tensor, v: torch.Tensor, workload: RefineWorkload) -> None:
    """The kernels' integrals equal the same rule run on the host. 1e-6 absolute covers an interval
    whose split test sits within an ulp of the threshold (the device's tanh and exp10 may round
    differently), which moves that cell by about the rule's local error, ~1e-7; a lost, doubled or
    misplaced interval moves its cell by its whole share. Not the exact integrals: the rule's own
    error exceeds 1e-5 in about one run in five at a random seed, and a missed peak is off by ~3."""
    want = simpson_on_host(u, v, workload.tol, workload.max_levels)[0]
    torch.testing.assert_close(got.double().cpu(), want, rtol=0, atol=1e-6)


class HostLevels(aisp.Benchmark):
    """out[c] = the adaptive integral of cell c's peak, levels launched by the host."""

    workload = WORKLOAD
    inputs = ("u", "v")
    scratch = ("out", "lists", "count")

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.lib = LIBRARY.load(self.device, SIGNATURES)
        self.u = torch.randn(w.cells, device=self.device, generator=gen)
        self.v = torch.randn(w.cells, device=self.device, generator=gen)
        self.out = torch.empty(w.cells, dtype=torch.float64, device=self.device)
        self.lists = torch.empty(2, w.cap, 3, dtype=torch.float64, device=self.device)  # {a, b, (cell, pad)}
        self.count = torch.zeros(w.max_levels + 1, dtype=torch.int32, device=self.device)
        self.pinned_count = torch.zeros(1, dtype=torch.int32).pin_memory()
        self.levels = ctypes.c_int(0)
        grid = 8 * torch.cuda.get_device_properties(self.device).multi_processor_count
        self.refine = Refine((PTR * 2)(self.lists[0].data_ptr(), self.lists[1].data_ptr()), self.count.data_ptr(),
                             self.out.data_ptr(), self.u.data_ptr(), self.v.data_ptr(), w.cap, w.max_levels, grid, w.tol)
        got = self.run().clone()
        torch.cuda.synchronize(self.device)
        assert int(self.count[w.max_levels]) == 0, "a level's interval list overflowed"
        check_refinement(got, self.u, self.v, w)

    def run(self) -> torch.Tensor:
        native.check(self.lib.dp_host(self.refine, self.workload.cells, self.pinned_count.data_ptr(),
                                      ctypes.byref(self.levels), native.stream(self.device)), "dp_host")
        return self.out

    def metrics(self) -> dict[str, float]:
        """Levels the last call ran."""
        return {"levels": float(self.levels.value)}


def get_benchmark() -> aisp.Benchmark:
    return HostLevels()


if __name__ == "__main__":
    aisp.main(get_benchmark)
