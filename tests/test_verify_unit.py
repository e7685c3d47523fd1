from __future__ import annotations

import pytest
import torch

import aisp
from aisp.harness.verify import (
    TOLERANCES,
    VerificationError,
    compare,
    detach_copy,
    input_signature,
    match_inputs,
    refill,
)


def _cmp(ref, out, **kw):
    return compare(detach_copy(ref), detach_copy(out), aisp.Workload(**kw))


@pytest.mark.parametrize(("dtype", "scale"), [(torch.bfloat16, 1e-3), (torch.float32, 1e-6)])
def test_all_zeros_fails_against_small_values(dtype, scale):
    ref = (torch.randn(4096, generator=torch.Generator().manual_seed(0)) * scale).to(dtype)
    with pytest.raises(VerificationError, match="outside tolerance"):
        _cmp(ref, torch.zeros_like(ref))


def test_zeros_fail_on_relative_l2_even_under_a_loose_declared_element_tolerance():
    ref = torch.randn(4096, generator=torch.Generator().manual_seed(0)).bfloat16()
    with pytest.raises(VerificationError, match="relative L2 error 1 exceeds"):
        _cmp(ref, torch.zeros_like(ref), element_tol=10.0)


def test_a_uniformly_low_bf16_output_fails_on_relative_l2():
    ref = torch.randn(4096, generator=torch.Generator().manual_seed(0)).bfloat16()
    low = (ref.float() * 0.96).bfloat16()
    with pytest.raises(VerificationError, match="relative L2 error 0.04"):
        _cmp(ref, low, rtol=0.05)
    _cmp(ref, low, rtol=0.05, max_rel_l2=0.05)


def test_bf16_matmuls_with_different_accumulation_order_pass():
    gen = torch.Generator().manual_seed(0)
    k = 4096
    a, b = torch.randn(256, k, generator=gen).bfloat16(), (torch.randn(k, 256, generator=gen) / k**0.5).bfloat16()
    whole = a @ b
    split = a[:, : k // 2] @ b[: k // 2] + a[:, k // 2:] @ b[k // 2:]
    evidence = _cmp(whole, split)
    assert 1e-3 < evidence.rel_l2_err < TOLERANCES["bf16"].max_rel_l2


def test_fp32_exact_copy_passes_with_zero_error():
    ref = torch.randn(64, 64)
    evidence = _cmp(ref, ref.clone())
    assert evidence.max_abs_err == evidence.rel_l2_err == 0.0


def test_integer_outputs_must_match_exactly():
    a = torch.arange(10)
    b = a.clone()
    b[3] += 1
    with pytest.raises(VerificationError, match="exact match"):
        _cmp(a, b)


def test_tf32_tolerance_accepts_tf32_error_but_fp32_does_not():
    ref = torch.ones(100)
    out = ref * (1 + 2e-3)
    _cmp(ref, out, precision="tf32")
    with pytest.raises(VerificationError, match="outside tolerance"):
        _cmp(ref, out, precision="fp32")


def test_nan_where_baseline_has_nan_is_fine():
    ref = torch.tensor([1.0, float("nan"), 3.0])
    _cmp(ref, ref.clone())
    with pytest.raises(VerificationError, match="NaN/Inf"):
        _cmp(torch.tensor([1.0, 2.0]), torch.tensor([1.0, float("inf")]))


def test_structure_must_match():
    with pytest.raises(VerificationError, match="structure"):
        _cmp({"a": torch.ones(2)}, {"b": torch.ones(2)})


def test_evidence_reports_errors():
    ev = _cmp(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0001]))
    assert ev.max_abs_err == pytest.approx(1e-4, rel=1e-2)
    assert ev.max_rel_err == pytest.approx(5e-5, rel=1e-2)


def test_none_output_is_rejected():
    with pytest.raises(VerificationError, match="None"):
        detach_copy(None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn, torch.int8, torch.bool])
def test_input_guard_catches_a_change_in_any_dtype(dtype):
    from aisp.harness.verify import CallGuard

    bench = aisp.Benchmark()
    bench.x = torch.ones(4, 4).to(dtype)
    guard = CallGuard(bench)
    assert guard.changed() == []
    bench.x[0, 0] = torch.zeros((), dtype=dtype)
    assert guard.changed() == ["x"]


def _pair(dtype: torch.dtype = torch.float32):
    bench = aisp.Benchmark()
    bench.inputs = ("x", "ids", "mask")
    bench.x = torch.randn(8, 8, generator=torch.Generator().manual_seed(0)).to(dtype)
    bench.ids = torch.arange(10, 20)
    bench.mask = torch.arange(16) % 4 == 0
    return bench


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn, torch.complex64])
def test_refill_gives_every_variant_the_same_new_values_in_place(dtype):
    base, other = _pair(dtype), _pair(dtype)
    before = {n: t.clone() for n, t in vars(base).items() if isinstance(t, torch.Tensor)}
    pointer = base.x.data_ptr()
    refill(base, seed=5)
    refill(other, seed=5)
    assert base.x.data_ptr() == pointer
    for name, old in before.items():
        new, bits = getattr(base, name), lambda t: t.contiguous().view(torch.uint8)
        assert new.dtype == old.dtype and not torch.equal(bits(new), bits(old)), name
        assert torch.equal(bits(new), bits(getattr(other, name))), name
    assert 10 <= int(base.ids.min()) and int(base.ids.max()) <= 19
    assert torch.isfinite(torch.view_as_real(base.x) if dtype.is_complex else base.x.float()).all()


def test_refill_changes_a_constant_input():
    bench = aisp.Benchmark()
    bench.inputs, bench.x = ("x",), torch.zeros(16)
    refill(bench, seed=1)
    assert bool((bench.x != 0).any())


def test_declared_inputs_must_match_the_baseline_and_exist():
    base, other = _pair(), _pair()
    other.x = torch.randn(8, 4)
    match_inputs(input_signature(base), _pair())
    with pytest.raises(VerificationError, match="declared input 'x'"):
        match_inputs(input_signature(base), other)
    other.inputs = ("x", "ids")
    with pytest.raises(VerificationError, match="declared input 'mask'"):
        match_inputs(input_signature(base), other)
    other.inputs = ("nothing",)
    with pytest.raises(VerificationError, match="holds no tensor"):
        input_signature(other)


def test_an_attribute_set_over_a_declared_role_fails_setup_with_its_name(monkeypatch):
    """A tensor assigned to ``self.scratch`` in setup() (the outside-memory fixture's 256 MiB did) would
    make the checked call iterate its elements for minutes; set_up refuses it with a one-line reason."""
    from aisp.harness import execute
    from aisp.harness.benchmark import Benchmark

    class Shadowed(Benchmark):
        inputs = ("x",)

        def setup(self) -> None:
            self.x = torch.ones(4)
            self.scratch = torch.empty(1 << 20)

        def run(self) -> torch.Tensor:
            return self.x * 2

    class Fine(Shadowed):
        def setup(self) -> None:
            self.x, self.held = torch.ones(4), torch.empty(8)

    execute.declared_names(Fine())
    bench = Shadowed()
    bench.setup()
    with pytest.raises(TypeError, match=r"setup\(\) set self.scratch to a Tensor; 'scratch' names"):
        execute.declared_names(bench)
    monkeypatch.setattr(execute, "load_benchmark", lambda path: Shadowed())
    with pytest.raises(TypeError, match="self.scratch"):
        execute.set_up(execute.Variant(execute.Path("optimized_x.py")), torch.device("cpu"), 0)
