"""Kernels to try ``kernel_check.py`` and ``aisp check`` on (and their tests' fixtures): a row softmax
as a reference, a correct two-pass version, one with a classic tile-tail bug, and three planted
cheats that look faster or right without being right: a cached answer, a bfloat16 answer for
float32 inputs, and (GPU) work left on a side stream the caller never waits for.

    cd ch20 && python kernel_check.py kernel_check_examples:softmax_two_pass \\
        --reference kernel_check_examples:softmax_reference --shapes RxC --dims R=64 C=1024 --random 4   # all match
    cd ch20 && python kernel_check.py kernel_check_examples:softmax_tail_bug \\
        --reference kernel_check_examples:softmax_reference --shapes RxC --dims R=64 C=1024 --random 4   # 1024 matches, odd widths fail

Any callable works the same way: a Triton kernel's Python wrapper, a CUDA C++ function loaded
through ``aisp.kits.native``, a CuPy or Numba kernel wrapped to take and return torch tensors.
"""

from __future__ import annotations

import torch

BLOCK = 128
"""Columns per tile in the tail-bug version."""


def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim, computed in fp32, returned in x's dtype."""
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def softmax_two_pass(x: torch.Tensor) -> torch.Tensor:
    """Pass 1: row max; pass 2: exp(x - max) and its sum; then normalize."""
    xf = x.float()
    e = (xf - xf.amax(dim=-1, keepdim=True)).exp()
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)


def softmax_tail_bug(x: torch.Tensor) -> torch.Tensor:
    """As if written tile by tile: the row sum only covers whole BLOCK-wide tiles, so the columns
    after the last whole tile are left out of the denominator (right when the width divides by BLOCK)."""
    xf = x.float()
    e = (xf - xf.amax(dim=-1, keepdim=True)).exp()
    whole = x.shape[-1] // BLOCK * BLOCK or x.shape[-1]
    return (e / e[..., :whole].sum(dim=-1, keepdim=True)).to(x.dtype)


def softmax_raises(x: torch.Tensor) -> torch.Tensor:
    """A kernel that fails to launch (to show how an exception is reported)."""
    raise RuntimeError("invalid configuration argument")


_CACHE: dict[tuple[int, tuple[int, ...]], torch.Tensor] = {}


def softmax_cached(x: torch.Tensor) -> torch.Tensor:
    """Cheat: the answer computed on the first call for this buffer, returned for every later call
    (free after the first call, wrong once the buffer holds new values)."""
    key = (x.data_ptr(), tuple(x.shape))
    if key not in _CACHE:
        _CACHE[key] = softmax_reference(x)
    return _CACHE[key].clone()


def softmax_bf16(x: torch.Tensor) -> torch.Tensor:
    """Cheat: computed and returned in bfloat16 whatever the input's dtype (half the bytes)."""
    return torch.softmax(x.bfloat16(), dim=-1)


_SIDE: list[torch.cuda.Stream] = []


def softmax_side_stream(x: torch.Tensor) -> torch.Tensor:
    """Cheat (CUDA only): the work is queued on a side stream that the caller's stream never waits
    for, so CUDA events on the caller's stream time almost nothing."""
    if x.device.type != "cuda":
        raise RuntimeError("softmax_side_stream needs a CUDA tensor")
    if not _SIDE:
        _SIDE.append(torch.cuda.Stream(device=x.device))
    side = _SIDE[0]
    side.wait_stream(torch.cuda.current_stream(x.device))  # the input is ready; the output is never joined
    with torch.cuda.stream(side):
        out = softmax_reference(x)
    return out
