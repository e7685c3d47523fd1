"""Baseline device graph launch (CUDA C++): per request, the host launches the graph the GPU chose.

An estimate x (8,192 floats) serves 64 requests in order, each a noisy measurement z[r]. A
one-block gate kernel takes mean((z[r] - x)^2): at most 4, the update path (x <- smooth(x + 0.25
(z[r] - x)): 2 kernels); above it (the level moved, ~1 request in 4), the re-estimate path (x <- 4
smoothing passes of z[r]: 4 kernels). Each path is a CUDA graph built once; the new x is the
request's answer, out[r]. Request r's path depends on x after request r - 1: no batching ahead.
Baseline: device_graph_launch.cu ``dgl_host``: per request the gate kernel, a 4-byte D2H copy of
its choice to pinned memory, cudaStreamSynchronize, then cudaGraphLaunch of the chosen path's graph
from the host: 64 host-GPU round trips per call, the GPU idle during each.
Optimized (optimized_device_graph_launch.py): the gate, a node of a scheduler graph, launches the
chosen path's graph from the GPU (device graph launch), then its own graph for the next request.
Ceiling (latency, the least a design needs): 1 graph launch, then per request 1 GPU-launched graph, blend, and smooth on blend's tmp (dependent).
Expect (measured, H200, 2026-11-26): 1.697 -> 0.9481 ms, 1.80x [1.67, 1.93], 26.5 -> 14.8 us per
request (estimated 1.5-2.5x), best the fire-and-forget variant; tail launch 1.118 ms, 1.53x [1.44, 1.62].
Run: python ch12/baseline_device_graph_launch.py  |  aisp bench run -t ch12:device_graph_launch
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch
from ch12_common import FLT, GRAPH_ENTRY_POINTS, INT, PTR, library, microseconds_per_call

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class GateWorkload(aisp.Workload):
    n: int = 8192
    requests: int = 64
    k: float = 0.25
    """Update path: x <- smooth(x + k (z[r] - x))."""
    thr2: float = 4.0
    """Mean squared innovation above which a request takes the re-estimate path (noise alone: 1-1.25)."""
    jump_rate: float = 0.25
    jump: tuple[float, float] = (2.5, 4.0)
    """Inputs: z[r] = level[r] + N(0, 1); the level starts at 0 and moves by +-U(jump) at ~jump_rate of
    the requests (innovation >= 7.3 there, 1-1.25 elsewhere: far from thr2 either way)."""

    def measurements(self, gen: torch.Generator) -> torch.Tensor:
        """z, [requests, n] float32 on the generator's device."""
        draw = [torch.rand(self.requests, generator=gen, device=gen.device) for _ in range(3)]
        lo, hi = self.jump
        steps = (draw[0] < self.jump_rate) * torch.where(draw[1] < 0.5, -1.0, 1.0) * (lo + (hi - lo) * draw[2])
        return torch.cumsum(steps, 0)[:, None] + torch.randn(self.requests, self.n, generator=gen, device=gen.device)


WORKLOAD = GateWorkload(items=GateWorkload.requests, item_unit="requests", precision="fp32", requires=native.REQUIRES, window="idle",
                        latency=aisp.LatencyCounts(graph_launches=1, device_graph_launches=64, graph_nodes=64, dependent_graph_nodes=64),
                        ceiling_note="profiled (torch profiler, H200): kernels ~6.5 us a request (gate 3.4) + 2 device graph launches (2 x 3.9 us)")
LIBRARY = library("device_graph_launch", "-rdc=true", "-lcudadevrt")


class Requests(ctypes.Structure):  # the Requests struct of device_graph_launch.cu, passed by value
    _fields_ = [("z", PTR), ("x", PTR), ("tmp", PTR), ("out", PTR), ("routes", PTR), ("ctl", PTR), ("n", INT),
                ("requests", INT), ("k", FLT), ("thr2", FLT)]


SIGNATURES = {**GRAPH_ENTRY_POINTS, "dgl_paths": [Requests, INT, PTR, PTR], "dgl_host": [Requests, PTR, PTR, PTR],
              "dgl_scheduler": [Requests, PTR, INT, ctypes.POINTER(PTR), PTR], "dgl_device": [Requests, PTR, PTR]}
TAIL, FIRE_AND_FORGET = 1, 2
"""How the scheduler launches a path graph (device_graph_launch.cu ``Mode``)."""


def smooth(y: torch.Tensor) -> torch.Tensor:
    """(1 2 1) / 4 smoothing, edges repeated."""
    p = torch.cat([y[:1], y, y[-1:]])
    return 0.25 * p[:-2] + 0.5 * p[1:-1] + 0.25 * p[2:]


def gate_reference(z: torch.Tensor, w: GateWorkload) -> tuple[torch.Tensor, list[int], list[float]]:
    """The loop in float64: each request's estimate, path (0 update, 1 re-estimate) and innovation."""
    z = z.double()
    x, out, routes, innovations = torch.zeros_like(z[0]), torch.empty_like(z), [], []
    for r in range(len(z)):
        innovations.append(float(((z[r] - x) ** 2).mean()))
        routes.append(int(innovations[-1] > w.thr2))
        out[r] = x = smooth(smooth(smooth(smooth(z[r])))) if routes[-1] else smooth(x + w.k * (z[r] - x))
    return out, routes, innovations


def check_loop(out: torch.Tensor, routes: torch.Tensor, ctl: torch.Tensor, z: torch.Tensor, w: GateWorkload) -> None:
    """Raise unless the loop ran every request (ctl: next, cur, choice, device launch status), on the
    reference's paths, to the reference's estimates."""
    if int(ctl[3]):
        raise RuntimeError(f"a device-side cudaGraphLaunch failed with status {int(ctl[3])}")
    if int(ctl[0]) != w.requests:
        raise RuntimeError(f"the loop ran {int(ctl[0])} of {w.requests} requests")
    ref, ref_routes, _ = gate_reference(z, w)
    if routes.tolist() != ref_routes:
        raise AssertionError(f"paths {routes.tolist()} differ from the reference's {ref_routes}")
    torch.testing.assert_close(out.double(), ref.to(out.device), rtol=1e-4, atol=1e-4)


class HostDispatch(aisp.Benchmark):
    """out[r] = the estimate after request r; routes[r] = its path, each launched by the host."""

    workload = WORKLOAD
    inputs = ("z",)
    scratch = ("x", "tmp", "out", "routes", "ctl", "pinned_choice")
    device_launch = False  # whether the path graphs are instantiated for launch from the GPU

    def setup(self) -> None:
        w, dev = self.workload, self.device
        self.lib = LIBRARY.load(dev, SIGNATURES)
        self.z = w.measurements(self.generator())
        self.x, self.tmp = torch.empty(w.n, device=dev), torch.empty(w.n, device=dev)
        self.out = torch.empty(w.requests, w.n, device=dev)
        self.routes, self.ctl = (torch.zeros(m, dtype=torch.int32, device=dev) for m in (w.requests, 4))
        self.pinned_choice = torch.zeros(1, dtype=torch.int32).pin_memory()
        ptrs = (t.data_ptr() for t in (self.z, self.x, self.tmp, self.out, self.routes, self.ctl))
        self.q = Requests(*ptrs, w.n, w.requests, w.k, w.thr2)
        self.paths = (PTR * 2)()
        native.check(self.lib.dgl_paths(self.q, int(self.device_launch), self.paths, native.stream(dev)), "dgl_paths")
        self.prepare()
        out, routes = (t.clone() for t in self.run())
        torch.cuda.synchronize(dev)
        check_loop(out, routes, self.ctl.cpu(), self.z, w)

    def prepare(self) -> None:
        """What a variant builds once before the first call."""

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        native.check(self.lib.dgl_host(self.q, self.paths, self.pinned_choice.data_ptr(), native.stream(self.device)),
                     "dgl_host")
        return self.out, self.routes

    def metrics(self) -> dict[str, float]:
        """Back-to-back time of a call per request, and the requests that took the re-estimate path."""
        per_request = microseconds_per_call(self.run, self.device) / self.workload.requests
        return {"us_per_request": per_request, "reestimates": float(self.routes.sum())}

    def teardown(self) -> None:
        for i, exec_ in enumerate(getattr(self, "paths", ())):
            if exec_:
                native.check(self.lib.graph_destroy(exec_), "graph_destroy")
                self.paths[i] = None


def get_benchmark() -> aisp.Benchmark:
    return HostDispatch()


if __name__ == "__main__":
    aisp.main(get_benchmark)
