from __future__ import annotations

import pytest
import torch

import aisp
from aisp.harness.verify import TOLERANCES, VerificationError, compare, detach_copy, tolerance


def _cmp(ref, out, **kw):
    return compare(detach_copy(ref), detach_copy(out), aisp.Workload(**kw))


def test_dtype_default_tolerances():
    w = aisp.Workload()
    assert tolerance(w, torch.float32) == TOLERANCES["fp32"]
    assert tolerance(w, torch.bfloat16) == TOLERANCES["bf16"]
    assert tolerance(w, torch.int64) == (0.0, 0.0)
    assert tolerance(aisp.Workload(precision="tf32"), torch.float32) == TOLERANCES["tf32"]
    assert tolerance(aisp.Workload(rtol=0.5), torch.float32)[0] == 0.5


def test_integer_outputs_must_match_exactly():
    a = torch.arange(10)
    b = a.clone()
    b[3] += 1
    with pytest.raises(VerificationError, match="exact match"):
        _cmp(a, b)


def test_tf32_tolerance_accepts_tf32_error_but_fp32_does_not():
    ref = torch.ones(100)
    out = ref * (1 + 3e-3)
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
    from aisp.harness.verify import InputGuard

    bench = aisp.Benchmark()
    bench.x = torch.ones(4, 4).to(dtype)
    guard = InputGuard(bench)
    assert guard.changed(bench) == []
    bench.x[0, 0] = torch.zeros((), dtype=dtype)
    assert guard.changed(bench) == ["x"]
