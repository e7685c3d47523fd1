"""Multi-rank helpers for chapter scripts that torchrun starts themselves (not through the harness).

The harness runs multi-rank *pairs* itself (:mod:`aisp.harness.distributed`); a chapter's tool
script (an FSDP example, a context-parallel sweep) uses these to join the process group the same
way, time a step on the slowest rank, and write code that also runs as a single process.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist

from aisp.harness.distributed import NVLS_OFF, init, rank_from_env
from aisp.harness.execute import pick_device
from aisp.harness.timing import time_call


def script_init(device_choice: str = "auto", timeout_s: float = 600.0) -> torch.device:
    """For a script that torchrun starts itself (not the harness): NVLink multicast off in this
    process, then the process group joined as :func:`init` does. Returns this rank's device."""
    os.environ.update(NVLS_OFF)
    return init(rank_from_env(), pick_device(device_choice), timeout_s)


def world_and_rank() -> tuple[int, int]:
    """(world size, rank) of the default process group; (1, 0) without one: a world of one rank,
    so code written for several ranks also runs in a plain process."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


def high_priority_group() -> dist.ProcessGroup:
    """A new group of the default group's ranks; on NCCL its stream has high priority, so its kernels'
    pending blocks are dispatched ahead of an equal-priority stream's whenever an SM slot frees (ch11's
    ``stream_priority``); on gloo a plain group of the same ranks. ``new_group`` is a collective: every
    rank calls this in the same order (in setup) and destroys the group in teardown
    (``dist.destroy_process_group(group)``): a group kept past its default group's destruction aborted
    a gloo rank at interpreter exit ("terminate called without an active exception")."""
    if dist.get_backend() == "nccl":
        options = dist.ProcessGroupNCCL.Options()
        options.is_high_priority_stream = True
        return dist.new_group(backend="nccl", pg_options=options)
    return dist.new_group(backend=dist.get_backend())


def peer_view(handle: Any, local: torch.Tensor, peer: int) -> torch.Tensor:
    """``peer``'s tensor at ``local``'s place in symmetric memory (``symm_mem.rendezvous``'s handle),
    mapped on this GPU: reads and copies from it cross NVLink. Keep it out of a benchmark's tensor
    attributes (a local, or a field of a plain object): the harness's input guard would snapshot
    memory the other GPU writes."""
    if hasattr(handle, "get_remote_tensor"):  # newer PyTorch: adds the tensor's offset in its pool block
        return handle.get_remote_tensor(peer, local.size(), local.dtype)
    offset = getattr(handle, "offset", 0) // local.element_size()
    return handle.get_buffer(peer, local.size(), local.dtype, offset)


def time_slowest(fn: Callable[[], Any], device: torch.device, iterations: int) -> list[float]:
    """For scripts: time ``fn()`` ``iterations`` times on every rank, the ranks meeting at a
    barrier before each call; returns each call's slowest-rank time in ms (all_reduce MAX)."""
    samples = []
    for _ in range(iterations):
        dist.barrier()
        samples.append(time_call(fn, device).ms)
    worst = torch.tensor(samples, dtype=torch.float64, device=device)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    return worst.tolist()


@contextmanager
def gemm_carveout(sms: int | None) -> Iterator[None]:
    """GEMMs run inside leave ``sms`` SMs idle (``torch._C._set_sm_carveout_experimental``): a large
    GEMM otherwise holds every SM until it ends, so a collective launched beside it waits for SMs
    and the overlap is lost. Only cuBLASLt honours the carveout (plain cuBLAS, which runs backward's
    GEMMs, ignored it on an H200), so cuBLASLt is the preferred library inside. No-op for None or
    without CUDA; the previous settings are restored."""
    if sms is None or not torch.cuda.is_available():
        yield
        return
    before, library = torch._C._get_sm_carveout_experimental(), torch.backends.cuda.preferred_blas_library()
    torch._C._set_sm_carveout_experimental(sms)
    torch.backends.cuda.preferred_blas_library("cublaslt")
    try:
        yield
    finally:
        torch._C._set_sm_carveout_experimental(before)
        torch.backends.cuda.preferred_blas_library(library)


class SymmetricReduce:
    """One-shot all-reduce through symmetric memory (``torch.ops.symm_mem.one_shot_all_reduce_out``):
    the partial is copied into this rank's buffer for its call site, then one kernel meets the peers at
    a barrier in the buffers' signal pads, loads every peer's buffer over NVLink (plain P2P loads; NVLink
    multicast stays off) and writes the sum back into the partial. No NCCL call, so a CUDA graph can
    hold it. A buffer per call site: a rank may refill a buffer only after every peer has passed a later
    site's barrier, i.e. finished reading it."""

    def __init__(self, sites: int, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> None:
        import torch.distributed._symmetric_memory as symm_mem  # CUDA builds only

        self.group = dist.group.WORLD.group_name
        self.bufs = [symm_mem.empty(shape, dtype=dtype, device=device) for _ in range(sites)]
        for buf in self.bufs:
            symm_mem.rendezvous(buf, self.group)

    def __call__(self, partial: torch.Tensor, site: int) -> torch.Tensor:
        buf = self.bufs[site]
        buf.copy_(partial)
        return torch.ops.symm_mem.one_shot_all_reduce_out(buf, "sum", self.group, partial)
