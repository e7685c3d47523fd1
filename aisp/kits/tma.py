"""Global scratch for Triton's device-side TMA descriptors (``tl.make_tensor_descriptor``).

A kernel that builds tensor descriptors on the device writes each one (128 bytes a program) to
global memory that Triton asks for at launch from the allocator given to ``triton.set_allocator``.
In Triton 3.6 that allocator is a context variable, so a launcher sets it right before each CUDA
launch (a launch from another thread or context would otherwise find none and fail).
"""

from __future__ import annotations

import torch


def tma_scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    """Scratch for the descriptors, from PyTorch's stream-ordered caching allocator (no cudaMalloc
    per launch; Triton's 128-byte alignment is met by the allocator's 512-byte blocks)."""
    return torch.empty(size, device="cuda", dtype=torch.int8)


def use_torch_scratch() -> None:
    """Make PyTorch's allocator the source of TMA descriptor scratch for launches from this context."""
    import triton

    triton.set_allocator(tma_scratch)
