"""Baseline kubernetes: a preprocessing step on the node's shared CPU pool, next to busy neighbours.

Baseline: what a pod gets from the kubelet's default ``none`` CPU manager (or as a Burstable pod):
its threads run anywhere in the node's shared pool, where other pods' threads run too. Here one
busy-looping neighbour process per CPU stands for the other tenants (started in setup, resumed only
while run() runs); the step - decode 4 batches of 32 uint8 3x256x256 images to float, normalize,
resize to 224x224 on k intra-op threads, copy to the device and reduce - shares every core with
them. The scheduler time-slices the k threads against the neighbours, and each parallel op waits
for its slowest, preempted thread.
Optimized (optimized_kubernetes.py): what the static CPU manager gives a Guaranteed pod with an
integer CPU request: k exclusive cores. The same neighbours run, kept off those k cores, and all of
this process's threads run on them. Same work and outputs.
Window: the step is host (CPU) work, so the pair is timed from idle (``window="idle"``).
Expect: 2.52x measured on our 16-core H200 VM (224 -> 89 ms; k = 4 threads against 16
neighbours); less with few cores (1.4x on a 2-core box).
Run: python ch03/baseline_kubernetes.py  |  aisp bench run -t ch03:kubernetes
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

import aisp

NEIGHBOUR = ("import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"
             "if os.getppid() != int(sys.argv[1]): sys.exit()\n"
             "while True: pass")
"""A tenant that burns one CPU; PR_SET_PDEATHSIG kills it when its parent (argv[1]) dies, and it
exits at once if the parent died before the death signal was armed."""


@dataclass(frozen=True, kw_only=True)
class StepWorkload(aisp.Workload):
    batches: int = 4
    batch: int = 32
    side: int = 256
    out_side: int = 224
    pod_cpus: int = max(1, min(4, len(os.sched_getaffinity(0)) // 4))
    """The pod's integer CPU request: its intra-op threads and, optimized, its exclusive cores."""


def _workload() -> StepWorkload:
    w = StepWorkload()
    planes = w.batches * w.batch * 3
    # bytes: each uint8 image read once and its out_side^2 fp32 resize written once, at the host's memory rate.
    return StepWorkload(items=w.batches * w.batch, item_unit="images", precision="fp32",
                        bytes=float(planes * (w.side**2 + 4 * w.out_side**2)), link="host_memory",
                        ceiling_note="profiled (py-spy, 2-core CPU host): of the step's samples interpolate 60%, _step's cast and normalize 39%; busy neighbours beside it",
                        window="idle")


WORKLOAD = _workload()


class SharedPoolStep(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("images",)
    scratch = ("out",)

    def setup(self) -> None:
        w = self.workload
        gen = torch.Generator().manual_seed(self.seed)
        self.images = torch.randint(0, 256, (w.batches, w.batch, 3, w.side, w.side), generator=gen,
                                    dtype=torch.uint8)
        self.mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
        self.std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
        self.out = torch.empty(w.batches, w.batch, device=self.device)
        allowed = sorted(os.sched_getaffinity(0))
        self.neighbours = [self._spawn(self.neighbour_cpus(allowed)) for _ in allowed]

    def neighbour_cpus(self, allowed: list[int]) -> list[int]:
        """Where the neighbours may run: the whole shared pool."""
        return allowed

    def _spawn(self, cpus: list[int]) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", NEIGHBOUR, str(os.getpid())])
        os.sched_setaffinity(proc.pid, cpus)
        _stop(proc)
        return proc

    @contextmanager
    def neighbours_running(self) -> Iterator[None]:
        for proc in self.neighbours:
            os.kill(proc.pid, signal.SIGCONT)
        try:
            yield
        finally:
            for proc in self.neighbours:
                _stop(proc)

    @contextmanager
    def placement(self) -> Iterator[None]:
        yield

    def run(self) -> torch.Tensor:
        threads = torch.get_num_threads()
        torch.set_num_threads(self.workload.pod_cpus)
        try:
            with self.neighbours_running(), self.placement():
                return self._step()
        finally:
            torch.set_num_threads(threads)

    def _step(self) -> torch.Tensor:
        size = (self.workload.out_side, self.workload.out_side)
        for i, raw in enumerate(self.images):
            x = (raw.float().div_(255.0) - self.mean) / self.std
            x = torch.nn.functional.interpolate(x, size=size, mode="bilinear", align_corners=False)
            self.out[i] = x.to(self.device).mean(dim=(1, 2, 3))
        return self.out

    def teardown(self) -> None:
        for proc in self.neighbours:
            proc.kill()
            proc.wait()
        self.neighbours = []


def _stop(proc: subprocess.Popen) -> None:
    """Stop a neighbour and wait until it has stopped (SIGSTOP is delivered asynchronously)."""
    os.kill(proc.pid, signal.SIGSTOP)
    os.waitpid(proc.pid, os.WUNTRACED)


def get_benchmark() -> aisp.Benchmark:
    return SharedPoolStep()


if __name__ == "__main__":
    aisp.main(get_benchmark)
