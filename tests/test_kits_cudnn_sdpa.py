"""aisp.kits.cudnn_sdpa: cuDNN's band attention (ch13 sliding_window_attention ``_cudnn``).

On a CPU: the band bounds are the pair's window rule (and one key less is not), the variant needs the
frontend package and a GPU. On a GPU with ``nvidia-cudnn-frontend``: the kernel matches the dense-mask
SDPA at small shapes and spans at the edges, again after its inputs are refilled in place, and a band one
key short fails the harness's comparison.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.loader import import_module_at
from aisp.harness.verify import VerificationError, compare, flatten
from aisp.kits.cudnn_sdpa import REQUIRES, BandAttention, band_bounds

WINDOW = import_module_at(Path(__file__).resolve().parents[1] / "ch13" / "baseline_sliding_window_attention.py")
WORKLOAD, in_window = WINDOW.WORKLOAD, WINDOW.in_window


def band_mask(seq: int, left: int, right: int) -> torch.Tensor:
    """cuDNN's top-left band: key j kept for query i where i - left < j <= i + right."""
    i, j = torch.arange(seq)[:, None], torch.arange(seq)[None, :]
    return (j > i - left) & (j <= i + right)


@pytest.mark.parametrize("span", [1, 2, 48, 1024, 5000])
def test_band_bounds_are_the_pairs_window_rule(span: int) -> None:
    seq = 2048
    idx = torch.arange(seq)
    assert torch.equal(band_mask(seq, *band_bounds(span)), in_window(idx[:, None], idx[None, :], span))


def test_a_band_one_key_short_is_not_the_rule() -> None:
    """The bound the probe first used (span - 1, relative L2 0.023 on the H200) drops the window's oldest key."""
    seq, span = 256, 48
    idx = torch.arange(seq)
    left, right = band_bounds(span)
    assert not torch.equal(band_mask(seq, left - 1, right), in_window(idx[:, None], idx[None, :], span))


def test_band_bounds_refuse_an_empty_window() -> None:
    with pytest.raises(ValueError, match="at least itself"):
        band_bounds(0)


def test_the_variant_needs_a_gpu_and_the_frontend() -> None:
    assert REQUIRES.cuda and "cudnn" in REQUIRES.packages
    reason = unmet_requirements(REQUIRES, torch.device("cpu"))
    assert reason and "CUDA" in reason


def test_band_attention_on_a_cpu_is_unavailable() -> None:
    q = torch.zeros(1, 1, 8, 16, dtype=torch.bfloat16)
    with pytest.raises(aisp.Unavailable, match="needs a CUDA GPU"):
        BandAttention(q, q, q, q.clone(), 4)


def _qkv(batch: int, heads: int, seq: int, dim: int, seed: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return tuple(torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.bfloat16, generator=gen)
                 for _ in range(3))


def _reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, span: int) -> torch.Tensor:
    idx = torch.arange(q.shape[2], device=q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=in_window(idx[:, None], idx[None, :], span))


def _outputs(t: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """A run()'s tensor as the harness's comparison takes it."""
    return list(flatten(t))


needs_frontend = pytest.mark.skipif(importlib.util.find_spec("cudnn") is None,
                                    reason="needs nvidia-cudnn-frontend (pip install 'aisp[cudnn]')")


@pytest.mark.gpu
@needs_frontend
@pytest.mark.parametrize("span", [1, 48, 200, 512])
def test_band_attention_matches_the_dense_mask_and_follows_refilled_inputs(span: int) -> None:
    q, k, v = _qkv(2, 4, 512, 128, seed=span)
    out = torch.empty_like(q)
    band = BandAttention(q, k, v, out, span)
    compare(_outputs(_reference(q, k, v, span)), _outputs(band(q, k, v, out).clone()), WORKLOAD)
    for t in (q, k, v):  # the harness refills inputs in place before a timed call
        t.normal_()
    out.fill_(float("nan"))  # and poisons scratch
    compare(_outputs(_reference(q, k, v, span)), _outputs(band(q, k, v, out).clone()), WORKLOAD)


@pytest.mark.gpu
@needs_frontend
def test_a_band_one_key_short_fails_the_comparison() -> None:
    """The planted fault: span - 1 (the window's oldest key dropped) is caught by the pair's tolerance."""
    span = 48
    q, k, v = _qkv(2, 4, 512, 128, seed=1)
    out = torch.empty_like(q)
    short = BandAttention(q, k, v, out, span - 1)
    with pytest.raises(VerificationError):
        compare(_outputs(_reference(q, k, v, span)), _outputs(short(q, k, v, out).clone()), WORKLOAD)


@pytest.mark.gpu
@needs_frontend
def test_band_attention_refuses_another_layout_and_calls_after_close() -> None:
    q, k, v = _qkv(1, 2, 256, 128, seed=2)
    out = torch.empty_like(q)
    band = BandAttention(q, k, v, out, 64)
    wide = torch.empty(1, 2, 512, 128, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="shapes or strides"):
        band(wide, wide, wide, wide)
    band.close()
    band.close()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        band(q, k, v, out)
