"""aisp.kits.tma: the scratch allocator Triton's device-side tensor descriptors take at launch."""

from __future__ import annotations

import contextvars

import pytest

from aisp.kits.tma import tma_scratch, use_torch_scratch

pytest.importorskip("triton")


def test_use_torch_scratch_sets_the_allocator_of_this_context_only() -> None:
    from triton.runtime import _allocation

    def in_fresh_context() -> object:
        before = _allocation._allocator.get()
        use_torch_scratch()
        return before, _allocation._allocator.get()

    outer = _allocation._allocator.get()
    before, after = contextvars.Context().run(in_fresh_context)
    assert before is not tma_scratch and after is tma_scratch
    assert _allocation._allocator.get() is outer  # the caller's context is untouched
