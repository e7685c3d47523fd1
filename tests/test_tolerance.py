"""The tolerance rule (aisp/harness/tolerance.py): relative L2, the tail test in units of the
precision's rounding, and the differential test against a higher-precision reference.

Wrong outputs (zeros, a 4% bias, a wrong row, NaNs, bf16 where fp32 was asked) fail; two correct
computations in a different order pass on 20 seeds (5 for the sums of 16M elements with cancellations:
80M elements, 1.4 s of CI a seed); the tail counts fire exactly at their bounds."""

from __future__ import annotations

import pytest
import torch

import aisp
from aisp.harness.tolerance import TAIL_CAP, TOLERANCES, tolerance
from aisp.harness.verify import VerificationError, compare, detach_copy

SEEDS = range(20)
BF16_U = 2.0**-8


def _cmp(ref, out, high=None, **kw):
    return compare(detach_copy(ref), detach_copy(out), aisp.Workload(**kw),
                   None if high is None else detach_copy(high))


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _gemm_inputs(seed: int, k: int = 1024, dtype: torch.dtype = torch.bfloat16):
    gen = _gen(seed)
    return torch.randn(256, k, generator=gen).to(dtype), torch.randn(k, 256, generator=gen).to(dtype)


def _split_k(a: torch.Tensor, b: torch.Tensor, parts: int) -> torch.Tensor:
    """A GEMM whose K blocks are rounded to the inputs' dtype before they are summed (split-K)."""
    k = a.shape[1] // parts
    blocks = [(a[:, i:i + k].float() @ b[i:i + k].float()).to(a.dtype) for i in range(0, a.shape[1], k)]
    return sum(block.float() for block in blocks).to(a.dtype)


def _ring_attention(q, k, v):
    """Attention over two K/V blocks merged by online softmax, each block's output rounded."""
    half = k.shape[2] // 2
    parts = [torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k[:, :, s], v[:, :, s], 0.0, False)
             for s in (slice(0, half), slice(half, None))]
    (out_a, lse_a), (out_b, lse_b) = parts
    share = torch.sigmoid(lse_b - lse_a).reshape(*q.shape[:3], 1).to(q.dtype)
    return torch.lerp(out_a, out_b, share)


def test_defaults_and_relative_overrides():
    assert tolerance(aisp.Workload(), torch.float32) == TOLERANCES["fp32"]
    assert tolerance(aisp.Workload(), torch.bfloat16) == TOLERANCES["bf16"]
    assert tolerance(aisp.Workload(precision="tf32"), torch.float32) == TOLERANCES["tf32"]
    assert tolerance(aisp.Workload(), torch.int64) == TOLERANCES["exact"]
    bf16 = TOLERANCES["bf16"]
    assert (bf16.unit, bf16.element_tol, bf16.rtol) == (BF16_U, 2 * BF16_U, 4 * BF16_U)
    loose = tolerance(aisp.Workload(element_tol=0.1, rtol=0.2, max_rel_l2=0.3), torch.float32)
    assert (loose.element_tol, loose.rtol, loose.max_rel_l2) == (0.1, 0.2, 0.3)
    with pytest.raises(TypeError):
        aisp.Workload(atol=0.5)  # absolute tolerances are gone


@pytest.mark.parametrize("scale", [1e-6, 1.0, 1e3])
def test_the_verdict_does_not_depend_on_the_output_scale(scale):
    a, b = _gemm_inputs(0)
    ref = ((a.float() @ b.float()) * scale).bfloat16()
    _cmp(ref, (_split_k(a, b, 4).float() * scale).bfloat16())
    with pytest.raises(VerificationError):
        _cmp(ref, (ref.float() * 1.04).bfloat16())


def _fp32_gemm(seed: int) -> torch.Tensor:
    a, b = _gemm_inputs(seed, dtype=torch.float32)
    return a @ b


def _wrong_row(t: torch.Tensor) -> torch.Tensor:
    out = t.clone()
    out[7] = out[8]
    return out


def _nans(t: torch.Tensor) -> torch.Tensor:
    out = t.clone()
    out[3, 5] = float("nan")
    return out


MUTANTS = {
    "zeros": (torch.zeros_like, "outside tolerance"),
    "4% bias": (lambda t: (t.float() * 1.04).to(t.dtype), "outside tolerance|relative L2"),
    "wrong row": (_wrong_row, "outside tolerance"),
    "NaNs": (_nans, "NaN/Inf"),
}


@pytest.mark.parametrize("name", MUTANTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_wrong_outputs_fail(name, dtype):
    mutate, message = MUTANTS[name]
    ref = _fp32_gemm(0).to(dtype)
    with pytest.raises(VerificationError, match=message):
        _cmp(ref, mutate(ref))


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2, torch.complex64])
def test_fp8_and_complex_outputs_are_compared(dtype):
    ref = torch.randn(64, 64, generator=_gen(0)).to(dtype)
    assert _cmp(ref, ref.clone()).max_z == 0
    wrong = ref.clone()
    wrong[0, :8] = torch.zeros(8).to(dtype)
    with pytest.raises(VerificationError, match="outside tolerance"):
        _cmp(ref, wrong)


def test_bf16_computed_where_fp32_was_asked_fails():
    ref = _fp32_gemm(0)
    with pytest.raises(VerificationError, match="outside tolerance"):
        _cmp(ref, ref.bfloat16().float())
    with pytest.raises(VerificationError, match="outside tolerance"):
        _cmp(ref, ref.bfloat16().float(), precision="fp32")


def test_a_failure_lists_the_first_mismatches_with_their_index_and_values():
    ref = torch.ones(4, 4)
    out = ref.clone()
    out[1, 2], out[3, 0] = 2.0, 3.0
    with pytest.raises(VerificationError, match=r"first mismatches \[1, 2\]: baseline 1, optimized 2 \(z .*"
                                                r"\[3, 0\]: baseline 1, optimized 3"):
        _cmp(ref, out)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_gemm_blockings_pass(seed, dtype):
    a, b = _gemm_inputs(seed, dtype=dtype)
    ref = (a.double() @ b.double()).to(dtype)
    evidence = _cmp(ref, _split_k(a, b, 4))
    assert 0 < evidence.max_z <= 1


@pytest.mark.parametrize("seed", SEEDS)
def test_bf16_ring_attention_passes_against_one_call(seed):
    gen = _gen(seed)
    q, k, v = (torch.randn(1, 4, n, 64, generator=gen).bfloat16() for n in (256, 1024, 1024))
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float()).bfloat16()
    evidence = _cmp(ref, _ring_attention(q, k, v))
    assert 0 < evidence.max_z <= 1


@pytest.mark.parametrize("seed", range(5))
def test_sixteen_million_bf16_sums_with_cancellation_pass(seed):
    gen = _gen(seed)
    x, y, z = (torch.randn(1 << 24, generator=gen).bfloat16() for _ in range(3))
    evidence = _cmp((x + y) + z, x + (y + z))  # |r| down to 0 where the three cancel
    assert evidence.max_rel_err > 0.5 and evidence.max_z <= 1


@pytest.mark.parametrize("seed", SEEDS)
def test_fp32_against_tf32_rounded_inputs_passes_as_tf32_only(seed):
    a, b = _gemm_inputs(seed, dtype=torch.float32)
    tf32 = [(t.view(torch.int32) + 0x1000 & ~0x1FFF).view(torch.float32) for t in (a, b)]
    ref, out = a @ b, tf32[0] @ tf32[1]
    _cmp(ref, out, precision="tf32")
    with pytest.raises(VerificationError):
        _cmp(ref, out)


def _e4m3(t: torch.Tensor) -> torch.Tensor:
    scale = t.abs().max() / 448
    return (t / scale).to(torch.float8_e4m3fn).float() * scale


@pytest.mark.parametrize("seed", SEEDS)
def test_fp8_operands_pass_as_fp8_only(seed):
    a, b = _gemm_inputs(seed, dtype=torch.float32)
    ref, out = (a @ b).bfloat16(), (_e4m3(a) @ _e4m3(b)).bfloat16()
    _cmp(ref, out, precision="fp8")
    with pytest.raises(VerificationError):
        _cmp(ref, out)


@pytest.mark.parametrize("seed", SEEDS)
def test_fp32_gemm_orders_pass(seed):
    a, b = _gemm_inputs(seed, k=4096, dtype=torch.float32)
    _cmp((a.double() @ b.double()).float(), sum(a[:, i:i + 512] @ b[i:i + 512] for i in range(0, 4096, 512)))


def _tail_case(n: int, count: int, z: float):
    """fp32 ones against ones with ``count`` elements off by ``z`` times the element bound."""
    tol = TOLERANCES["fp32"]
    ref, out = torch.ones(n), torch.ones(n)
    out[:count] += z * (tol.element_tol + tol.rtol)
    return ref, out


@pytest.mark.parametrize(("n", "allowed"), [(1000, 4), (1 << 23, 8)])
def test_tail_allows_max_of_four_and_a_millionth_of_the_elements(n, allowed):
    assert _cmp(*_tail_case(n, allowed, 2.0)).max_z == pytest.approx(2.0, rel=1e-3)
    with pytest.raises(VerificationError, match=f"{allowed + 1} of {n} elements outside tolerance"):
        _cmp(*_tail_case(n, allowed + 1, 2.0))


def test_no_element_may_exceed_the_cap():
    assert _cmp(*_tail_case(1000, 1, TAIL_CAP * 0.99)).max_z < TAIL_CAP
    with pytest.raises(VerificationError, match="largest z 8.0"):
        _cmp(*_tail_case(1000, 1, TAIL_CAP * 1.01))


def test_exact_and_integer_outputs_allow_no_difference():
    ints = torch.arange(10)
    _cmp(ints, ints.clone())
    with pytest.raises(VerificationError, match="exact match"):
        _cmp(ints, ints + (ints == 3))
    floats = torch.linspace(1, 2, 100)
    with pytest.raises(VerificationError, match="outside tolerance"):
        _cmp(floats, floats.nextafter(torch.tensor(3.0)), precision="exact")
    flags = torch.arange(8) % 2 == 0
    with pytest.raises(VerificationError, match="exact match"):
        _cmp(flags, ~flags)


def _differential_case(seed: int):
    """A bf16 GEMM: fp64 reference g, baseline r (fp32 accumulation, rounded once)."""
    a, b = _gemm_inputs(seed)
    return a, b, a.double() @ b.double(), (a.float() @ b.float()).bfloat16()


@pytest.mark.parametrize("seed", SEEDS)
def test_differential_passes_a_split_k_optimized(seed):
    a, b, g, r = _differential_case(seed)
    _cmp(r, _split_k(a, b, 4), high=g)


def test_differential_fails_an_optimized_output_less_accurate_than_the_baseline():
    a, b, g, r = _differential_case(0)
    signs = torch.randint(0, 2, g.shape, generator=_gen(1)).double() * 2 - 1
    noisy = (g + BF16_U * g.abs().max() * signs).bfloat16()  # within the tail test and L2
    _cmp(r, noisy)
    with pytest.raises(VerificationError, match="mean error against the baseline's high-precision reference"):
        _cmp(r, noisy, high=g)
    outliers = r.clone()
    outliers.view(-1)[:3] += (3 * BF16_U * g.abs().max()).bfloat16()  # three elements, z < TAIL_CAP
    _cmp(r, outliers)
    with pytest.raises(VerificationError, match="max error against the baseline's high-precision reference"):
        _cmp(r, outliers, high=g)


def test_a_reference_of_another_structure_or_shape_is_an_error():
    r = torch.ones(4)
    with pytest.raises(VerificationError, match="reference\\(\\) returns"):
        _cmp(r, r, high=(r, r))
    with pytest.raises(VerificationError, match="reference\\(\\) has shape"):
        _cmp(r, r, high=torch.ones(5))


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(5))
def test_gpu_gemms_pass_the_defaults(seed):
    """On the GPU: cuBLAS bf16/fp16 GEMMs (fp32 accumulation) against fp64 rounded once, a split-K
    of them, and fp32 GEMMs K=8192 against fp64 pass; TF32 passes as tf32 and fails as fp32."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a, b = torch.randn(2048, 8192, device="cuda", generator=gen), torch.randn(8192, 2048, device="cuda", generator=gen)
    exact = a.double() @ b.double()
    for dtype in (torch.bfloat16, torch.float16):
        low_a, low_b = a.to(dtype), b.to(dtype)
        ref = (low_a.double() @ low_b.double()).to(dtype)
        _cmp(ref, low_a @ low_b)
        _cmp(ref, _split_k(low_a, low_b, 8))
    previous = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        _cmp(exact.float(), a @ b)
        torch.backends.cuda.matmul.allow_tf32 = True
        _cmp(exact.float(), a @ b, precision="tf32")
        with pytest.raises(VerificationError):
            _cmp(exact.float(), a @ b, precision="fp32")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
