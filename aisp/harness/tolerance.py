"""Tolerance: how far an optimized output may be from the baseline's and still be the same result.

Per tensor: relative L2 (the main gate), then a tail test per element in units of the precision's
rounding, and, where the baseline supplies a higher-precision reference, FlashAttention's
differential test. Integer and boolean outputs must match exactly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from aisp.harness.benchmark import SIMT_FORMATS, Workload


@dataclass(frozen=True)
class Tolerance:
    """What two correct implementations at one precision may differ by, all relative: per element
    ``|o - r| <= element_tol * max|r| + rtol * |r|`` (as a tail test, see ``TAIL_CAP``), per tensor
    ``||o - r|| / ||r|| <= max_rel_l2``. ``unit`` is the precision's unit roundoff."""

    unit: float
    element_tol: float
    rtol: float
    max_rel_l2: float


def rounding(unit: float, c: float, r: float, max_rel_l2: float) -> Tolerance:
    """A tolerance in units of the precision's rounding: element bound ``c*u*max|r| + r*u*|r|``."""
    return Tolerance(unit, c * unit, r * unit, max_rel_l2)


TOLERANCES: dict[str, Tolerance] = {
    "exact": Tolerance(0.0, 0.0, 0.0, 0.0), "int8": Tolerance(0.0, 0.0, 0.0, 5e-2),
    "fp64": rounding(2.0**-53, 1024, 4, 5e-8), "fp32": rounding(2.0**-24, 1024, 4, 5e-5),
    "tf32": rounding(2.0**-11, 2, 4, 5e-3), "fp16": rounding(2.0**-11, 2, 4, 5e-3),
    "bf16": rounding(2.0**-8, 2, 4, 2e-2), "fp8": rounding(2.0**-4, 2, 4, 0.1),
}
"""Per precision: u (unit roundoff: fp64 2^-53, fp32 2^-24, tf32 and fp16 2^-11, bf16 2^-8, fp8
e4m3 2^-4), the element bound ``c*u*max|r| + r*u*|r|`` and the relative L2 bound.

Relative L2 is the main gate (a bias every element hides within its bound); its bounds are
5-200x above two correct GEMMs (bf16 ~3e-3, fp16 ~4e-4, fp32 ~3e-7). The element test is a tail
test: z = |o - r| / bound, and a tensor passes when at most max(TAIL_MIN, TAIL_FRACTION * N)
elements have z > 1 and none has z > TAIL_CAP, so a 1-2 ulp difference where results cancel
(|r| tiny) neither fails by chance as N grows nor needs the check switched off.

c and r come from measurement on a CPU (tests/test_tolerance.py repeats the cases over 20 seeds),
as the largest
``(|o - r| - r*u*|r|) / (u*max|r|)`` over two correct computations of the same math:
- outputs rounded at the precision (bf16, fp16, tf32, fp8): bf16/fp16 GEMMs (K 256-4096) with
  fp32-exact rounding vs split-K over low-precision partials 0.40; attention in one call vs two
  K/V blocks merged by online softmax (as ring attention does) 0.67 bf16, 0.93 fp16; (x+y)+z vs
  x+(y+z) over 16M bf16 elements 0.41; tf32-rounded GEMM inputs vs fp32 0.51; per-tensor fp8 e4m3
  GEMM vs bf16 0.54. Hence c = 2 and r = 4 (two ulps at the bottom of a binade).
- outputs accumulated at the precision (fp32, fp64): the error grows with the reduction length;
  fp32 GEMMs K=4096 vs fp64 7.6, split-K 5.7, row sums 1.7 on a CPU; two fp32 GEMM shapes on an H200
  (ch01:performance, batched vs per-sample, refilled inputs) 6e-5 x rms(r), up to ~1,000. Hence
  c = 1024 (6e-5 of max|r| in fp32, what the former default allowed at 4.5 rms).
"exact" and "int8" allow no element difference. A workload's overrides are relative too."""
TAIL_MIN = 4
"""Elements with z > 1 that every tensor may have."""
TAIL_FRACTION = 1e-6
"""Fraction of a tensor's elements that may have z > 1 (above TAIL_MIN from 4M elements on)."""
TAIL_CAP = 8.0
"""No element may have z above this, however large the tensor."""
SHOWN_MISMATCHES = 5
"""Mismatching elements an error lists (index, baseline, optimized, z), as llm.c's validate does."""
DTYPE_PRECISION = {
    torch.float64: "fp64", torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
    torch.float8_e4m3fn: "fp8", torch.float8_e5m2: "fp8",
}


class VerificationError(AssertionError):
    """The optimized variant does not compute what the baseline computes."""


@dataclass
class Evidence:
    """What verification measured: the largest errors seen and the tolerance applied (``atol``: the
    element bound's absolute part in the output's units, ``element_tol * max|r|``)."""

    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    rel_l2_err: float = 0.0
    rtol: float = 0.0
    atol: float = 0.0
    max_rel_l2: float = 0.0
    max_z: float = 0.0
    checks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def merge(self, other: Evidence) -> None:
        self.max_abs_err = max(self.max_abs_err, other.max_abs_err)
        self.max_rel_err = max(self.max_rel_err, other.max_rel_err)
        self.rel_l2_err = max(self.rel_l2_err, other.rel_l2_err)
        self.max_z = max(self.max_z, other.max_z)
        self.rtol, self.atol, self.max_rel_l2 = other.rtol, other.atol, other.max_rel_l2

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def tolerance(workload: Workload, dtype: torch.dtype) -> Tolerance:
    """The tolerance for an output of this dtype: the precision's (the workload's, else the dtype's),
    with the workload's relative overrides applied."""
    if not (dtype.is_floating_point or dtype.is_complex):
        return TOLERANCES["exact"]
    precision = workload.precision or DTYPE_PRECISION.get(dtype, "fp32")
    base = TOLERANCES[SIMT_FORMATS.get(precision, precision)]
    overrides = {"element_tol": workload.element_tol, "rtol": workload.rtol, "max_rel_l2": workload.max_rel_l2}
    return replace(base, **{k: v for k, v in overrides.items() if v is not None})


def compare_tensor(path: str, r: torch.Tensor, o: torch.Tensor, workload: Workload) -> Evidence:
    """Raise VerificationError unless ``o`` is ``r`` within the workload's tolerance: integers
    exactly; floats with NaN/Inf where ``r`` has them, then the tail test, then relative L2."""
    if not (r.dtype.is_floating_point or r.dtype.is_complex):
        mismatched = int((r != o.to(r.device)).sum())
        if mismatched:
            raise VerificationError(f"{path}: {mismatched} of {r.numel()} elements differ (exact match required)")
        return Evidence()
    r_bad, o_bad = ~_finite(r), ~_finite(o.to(r.device))
    extra = int((o_bad & ~r_bad).sum())
    if extra:
        raise VerificationError(f"{path}: {extra} NaN/Inf values where the baseline has finite ones")
    r64, o64 = as_double(r), as_double(o.to(r.device))
    if not torch.equal(r_bad, o_bad) or not torch.equal(r64[r_bad].nan_to_num(), o64[o_bad].nan_to_num()):
        raise VerificationError(f"{path}: NaN/Inf pattern differs from the baseline's")
    diff, ref_abs = (o64 - r64).abs_(), r64.abs()
    if bool(r_bad.any()):
        diff, ref_abs = diff.where(~r_bad, 0.0), ref_abs.where(~r_bad, 0.0)
    tol = tolerance(workload, r.dtype)
    scale = float(ref_abs.max()) if ref_abs.numel() else 0.0
    evidence = Evidence(rtol=tol.rtol, atol=tol.element_tol * scale, max_rel_l2=tol.max_rel_l2)
    if not diff.numel():
        return evidence
    norm = float(ref_abs.norm())
    evidence.max_abs_err = float(diff.max())
    evidence.max_rel_err = float((diff / ref_abs.clamp_min(1e-30)).max())
    evidence.rel_l2_err = float(diff.norm()) / norm if norm > 0 else float(diff.norm())
    z = _z_scores(diff, evidence.atol, tol.rtol, ref_abs)
    evidence.max_z = float(z.max())
    over, allowed = int((z > 1).sum()), max(TAIL_MIN, int(TAIL_FRACTION * diff.numel()))
    if over > allowed or evidence.max_z > TAIL_CAP:
        raise VerificationError(
            f"{path}: {over} of {diff.numel()} elements outside tolerance (z > 1; {allowed} allowed), "
            f"largest z {evidence.max_z:.3g} (at most {TAIL_CAP:g}); z = |o - r| / (element_tol * max|r| + "
            f"rtol * |r|), element_tol={tol.element_tol:.3g}, rtol={tol.rtol:.3g}, max|r|={scale:.4g}"
            f"{_mismatches(r64, o64, z > 1, z, 'z')}")
    if norm > 0 and evidence.rel_l2_err > tol.max_rel_l2:
        raise VerificationError(f"{path}: relative L2 error {evidence.rel_l2_err:.3g} exceeds {tol.max_rel_l2:g}: "
                                f"the whole tensor is off{_mismatches(r64, o64, diff > 0, diff, '|o - r|')}")
    return evidence


def real_view(t: torch.Tensor) -> torch.Tensor:
    """A complex tensor as its real view (a trailing dimension of 2); a real one as it is."""
    return torch.view_as_real(t.detach()) if t.is_complex() else t.detach()


def as_double(t: torch.Tensor) -> torch.Tensor:
    """fp64 values of a real or complex tensor (complex as its real view)."""
    return real_view(t).double()


def _finite(t: torch.Tensor) -> torch.Tensor:
    """isfinite in the tensor's own dtype where torch has it (fp8 has none: via fp32)."""
    return torch.isfinite(real_view(t) if t.element_size() > 1 else t.float())


def _z_scores(diff: torch.Tensor, atol: float, rtol: float, ref_abs: torch.Tensor) -> torch.Tensor:
    """diff / (atol + rtol * |r|), with 0/0 = 0 and x/0 = inf (a zero bound allows no difference)."""
    z = diff / (ref_abs * rtol + atol)
    return z if atol > 0 else torch.where(diff > 0, z, torch.zeros_like(z))


def _mismatches(r64: torch.Tensor, o64: torch.Tensor, where: torch.Tensor, score: torch.Tensor, label: str) -> str:
    """The first few flagged elements: index, baseline value, optimized value, score."""
    flat = where.reshape(-1).nonzero().reshape(-1)[:SHOWN_MISMATCHES]
    shown = []
    for i in flat.tolist():
        index = tuple(int(k) for k in torch.unravel_index(torch.tensor(i), r64.shape))
        shown.append(f"{list(index)}: baseline {float(r64.reshape(-1)[i]):.6g}, "
                     f"optimized {float(o64.reshape(-1)[i]):.6g} ({label} {float(score.reshape(-1)[i]):.3g})")
    return "; first mismatches " + ", ".join(shown) if shown else ""


def differential(path: str, r: torch.Tensor, o: torch.Tensor, g: torch.Tensor, unit: float) -> None:
    """FlashAttention's test against a higher-precision reference g: the optimized output may be
    off g by at most twice the baseline's largest error and 1.5 times its mean error, plus one
    rounding of g (``unit``): the optimized output is held to the baseline's accuracy, not to its
    rounding pattern."""
    r64, o64, g = as_double(r), as_double(o.to(r.device)), g.to(r.device)
    if g.shape != r64.shape:
        raise VerificationError(f"{path}: reference() has shape {tuple(g.shape)}, run() {tuple(r.shape)}")
    finite = torch.isfinite(r64) & torch.isfinite(g)
    err_o, err_r, size = (o64 - g)[finite].abs(), (r64 - g)[finite].abs(), g[finite].abs()
    if not err_o.numel():
        return
    bounds = {"max": (float(err_o.max()), 2 * float(err_r.max()) + unit * float(size.max())),
              "mean": (float(err_o.mean()), 1.5 * float(err_r.mean()) + unit * float(size.mean()))}
    for what, (got, allowed) in bounds.items():
        if got > allowed:
            raise VerificationError(
                f"{path}: {what} error against the baseline's high-precision reference() {got:.3g} exceeds "
                f"{allowed:.3g} ({'2x' if what == 'max' else '1.5x'} the baseline's own, "
                f"{float(err_r.max() if what == 'max' else err_r.mean()):.3g}, plus one rounding)")
