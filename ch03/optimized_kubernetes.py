"""Optimized kubernetes: the same step on exclusive cores, as a Guaranteed pod gets them.

Baseline (baseline_kubernetes.py): k intra-op threads time-sliced against one busy neighbour per
CPU across the whole shared pool.
Optimized: the static CPU manager's behaviour for a Guaranteed pod with integer CPUs (requests ==
limits, see kubernetes_topology_pod.yaml): k cores belong to this pod alone. The same neighbours
run on the remaining cores only, and every thread of this process is bound to the k exclusive
cores while run() runs (undone afterwards). Nothing preempts the step's threads, so each parallel
op finishes when its work does.
Expect: 2.52x on our 16-core H200 VM; less with few cores.
Run: python ch03/optimized_kubernetes.py  |  aisp bench run -t ch03:kubernetes
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from baseline_kubernetes import SharedPoolStep

import aisp
from aisp.system import numa


class ExclusiveCoresStep(SharedPoolStep):
    def exclusive(self) -> tuple[int, ...]:
        return tuple(sorted(os.sched_getaffinity(0))[: self.workload.pod_cpus])

    def neighbour_cpus(self, allowed: list[int]) -> list[int]:
        """Kept off the pod's exclusive cores (all of them if the host has no other core)."""
        return [c for c in allowed if c not in self.exclusive()] or allowed

    @contextmanager
    def placement(self) -> Iterator[None]:
        with numa.bound(numa.Binding(self.cores)):
            yield

    def setup(self) -> None:
        self.cores = self.exclusive()
        super().setup()


def get_benchmark() -> aisp.Benchmark:
    return ExclusiveCoresStep()


if __name__ == "__main__":
    aisp.main(get_benchmark)
