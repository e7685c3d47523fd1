"""Baseline AoS → SoA (CUDA C++): advance 64M particles' x by dt * vx, particles stored as structs.

Baseline: ``Particle {x, y, z, vx, vy, vz, mass, charge}`` (32 bytes, aligned), an array of them
(aos_soa.cu, ``advance_aos``): one thread per particle reads ``p.x`` and ``p.vx``. The 8 useful bytes
sit in a 32-byte sector, the smallest unit DRAM and L2 move, so the kernel reads 32 bytes per
particle to use 8: 36 bytes of traffic for 12 useful (x, vx in; the new x out).
Optimized (optimized_aos_to_soa.py): the same particles as a struct of arrays, eight arrays of n
floats; x and vx are two dense streams read 16 bytes per thread (``advance_soa``): 12 bytes of
traffic per particle, all useful. Same fmaf, same result bit for bit.
Expect (measured, H200): 0.560 ms -> 0.198 ms, 2.83x [2.80, 2.86]; optimized 4,066 GB/s of useful
bytes (96% of the 4.2 TB/s HBM copy ceiling), the baseline 1,437 GB/s (34%). H100: not measured.
Run: python ch07/baseline_aos_to_soa.py  |  aisp bench run -t ch07:aos_to_soa
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch07_common import FLOAT, LONG, PTR, library

import aisp
from aisp.kits import native
from aisp.kits.native import ptr

FIELDS = ("x", "y", "z", "vx", "vy", "vz", "mass", "charge")


@dataclass(frozen=True, kw_only=True)
class ParticleWorkload(aisp.Workload):
    particles: int = 1 << 26
    dt: float = 0.01


def _particle_workload() -> ParticleWorkload:
    s = ParticleWorkload()
    # Useful bytes: x and vx read, the new x written (12 per particle); 2 FLOPs (one FMA) each.
    return ParticleWorkload(flops=2.0 * s.particles, bytes=12.0 * s.particles, items=s.particles,
                            item_unit="particles", precision="fp32", requires=native.REQUIRES)


WORKLOAD = _particle_workload()
LIBRARY = library("aos_soa.cu")
SIGNATURES = {"aos_advance": [PTR, PTR, FLOAT, LONG, PTR], "soa_advance": [PTR, PTR, FLOAT, LONG, PTR]}


class AosAdvance(aisp.Benchmark):
    """out[i] = particles[i].x + dt * particles[i].vx; ``particles`` is (n, 8), one row per particle."""

    workload = WORKLOAD
    inputs = ("particles",)
    scratch = ("out",)
    entry = "aos_advance"

    def setup(self) -> None:
        w = self.workload
        self.lib = LIBRARY.load(self.device, SIGNATURES)
        values = torch.randn(w.particles, len(FIELDS), device=self.device, generator=self.generator())
        self.particles = self.layout(values)
        self.out = torch.empty(w.particles, device=self.device)
        expected = values[:, FIELDS.index("x")] + w.dt * values[:, FIELDS.index("vx")]
        torch.testing.assert_close(self.run(), expected)

    def layout(self, values: torch.Tensor) -> torch.Tensor:
        """The particles as this variant stores them: row-major (n, 8), i.e. an array of structs."""
        return values

    def run(self) -> torch.Tensor:
        w = self.workload
        status = getattr(self.lib, self.entry)(ptr(self.particles), ptr(self.out), w.dt, w.particles,
                                               native.stream(self.device))
        native.check(status, type(self).__name__)
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return AosAdvance()


if __name__ == "__main__":
    aisp.main(get_benchmark)
