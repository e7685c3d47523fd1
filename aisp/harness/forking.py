"""Whether this process can fork children that do a worker's work (the zygote's pair workers,
torchrun's agent's ranks), asked of a short-lived child, and what a forked child draws anew."""

from __future__ import annotations

import os
import signal
import sys
import time

PROBE_S = 10.0
"""How long the probing child may take (a few milliseconds when it works); one still running then hangs."""


def fork_poisoned() -> bool:
    """Whether a child forked now could not do a worker's work: start CUDA (torch marks a fork bad once
    its process initialized CUDA or queried the driver, as ``torch.cuda.is_available()`` and
    ``torch._inductor.compile_fx``'s import do: every forked pair failed so on an H200, 2026-11-28), or
    run torch's CPU threads (once GNU OpenMP started its threads here, a child's first parallel op
    waits for them for ever). The child runs a parallel op on two threads."""
    import torch

    if torch.cuda.is_initialized():
        return True
    pid = os.fork()
    if pid == 0:
        if torch.cuda._is_in_bad_fork():
            os._exit(1)
        torch.set_num_threads(2)
        torch.ones(1 << 20).add_(1)  # above ATen's grain size: an OpenMP parallel region
        os._exit(0)
    deadline = time.monotonic() + PROBE_S
    while not (done := os.waitpid(pid, os.WNOHANG))[0] and time.monotonic() < deadline:
        time.sleep(0.002)
    if not done[0]:  # hung
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return not done[0] or os.waitstatus_to_exitcode(done[1]) != 0


def draw_own_seeds() -> None:
    """In a forked child: Python's and numpy's global random states drawn anew, as a new process
    draws them (the parent's would be every child's)."""
    import random

    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
