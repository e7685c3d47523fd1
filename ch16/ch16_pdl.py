"""Programmatic dependent launch (PDL) for the ``_pdl`` decode step's Triton kernels (sm_90+).

A kernel launched with ``launch_pdl=True`` inside the step's CUDA graph may start while the kernel
before it still runs: it launches once every program of that kernel has executed
``griddepcontrol.launch_dependents`` (or exited), and ``griddepcontrol.wait`` then blocks it until
that kernel has completed and its writes are visible (transitively: that kernel waited for its own
predecessor). So every kernel launched with PDL waits before it reads anything another kernel wrote,
and what it needs from no kernel (the GEMV's weights) it may start before the wait. Both
instructions are no-ops in a kernel launched without the attribute.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

PREFETCH = tl.constexpr(512)
"""Bytes of each weight row (of a GEMV program's K range) sent to L2 before the wait: 64 KB a
program of 128 rows, 12-25 MB a GEMV, a third to a half of H200's 50 MB L2."""


@triton.jit
def pdl_enter(PDL: tl.constexpr):
    """A small kernel's start: let the next kernel launch now (its programs take free SMs and wait
    there), then wait for the kernel before to complete."""
    if PDL:
        gdc_launch_dependents()
        gdc_wait()


@triton.jit
def prefetch_l2(ptrs, nbytes):
    """``nbytes`` (a multiple of 16, each address 16-byte aligned) from each address into L2, one bulk
    prefetch per element (``cp.async.bulk.prefetch``: nothing to wait for, no registers written)."""
    tl.inline_asm_elementwise("cp.async.bulk.prefetch.L2.global [$1], $2; // $0", "=r,l,r",
                              [ptrs.to(tl.int64, bitcast=True), nbytes], dtype=tl.int32, is_pure=False, pack=1)


def pdl_kwargs(pdl: bool, launch: bool = True) -> dict[str, bool]:
    """The launch keywords of a kernel with a ``PDL`` constexpr: its instructions on (``pdl``), and
    the launch attribute unless ``launch`` is False (the step's first kernel: nothing before it in
    the graph). Off: no keywords (the interpreter and GPUs before sm_90)."""
    return {"PDL": True, "launch_pdl": launch} if pdl else {}


def pdl_supported(device) -> bool:
    """sm_90 or later (griddepcontrol and the bulk prefetch are Hopper instructions)."""
    import torch

    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (9, 0)
