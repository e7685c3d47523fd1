"""One verified call of the kernel: what it returned is compared with the reference's answer by the
harness's verifier, after checks that name the usual ways a kernel looks right without being right:
an output that is an input (aliasing), inputs it overwrote, NaN/Inf, a lower precision than the
reference's, and an answer that does not follow its inputs (a cached answer)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from aisp.harness.benchmark import Workload
from aisp.harness.timing import synchronize
from aisp.harness.verify import Evidence, VerificationError, compare, detach_copy, flatten

Pairs = list[tuple[str, torch.Tensor]]
NARROW_DTYPES = (torch.bfloat16, torch.float16)
"""An fp32/fp64 output whose every value is one of these dtype's was computed in it and cast back."""
ROUNDED_MIN_ELEMENTS = 8


class Fired(Exception):
    """A check fired: ``check`` names it, the message says why."""

    def __init__(self, check: str, reason: str) -> None:
        super().__init__(reason)
        self.check, self.reason = check, reason


def tensors(args: Sequence[Any]) -> list[torch.Tensor]:
    return [a for a in args if isinstance(a, torch.Tensor)]


def clones(args: Sequence[Any]) -> list[Any]:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def reference(ref: Callable, args: Sequence[Any], device: torch.device) -> Pairs:
    """The reference's answer on private copies of the inputs."""
    try:
        out = ref(*clones(args))
        synchronize(device)
        return detach_copy(out)
    except Exception as exc:
        raise Fired("raised", f"reference raised {type(exc).__name__}: {exc}") from None


def guarded(fn: Callable, args: Sequence[Any], device: torch.device) -> tuple[Any, Pairs]:
    """Call ``fn`` on ``args`` themselves (a cache keyed on them must see the same tensors), then
    check it neither returned an input's storage nor wrote into an input. Returns (output, copy)."""
    before = [t.clone() for t in tensors(args)]
    storages = {t.untyped_storage().data_ptr(): i for i, t in enumerate(tensors(args)) if t.untyped_storage().nbytes()}
    try:
        out = fn(*args)
        synchronize(device)
        flat = list(flatten(out))
    except VerificationError as exc:
        raise Fired("mismatch", str(exc)) from None
    except Exception as exc:
        raise Fired("raised", f"kernel raised {type(exc).__name__}: {exc}") from None
    for path, t in flat:
        if t.untyped_storage().nbytes() and t.untyped_storage().data_ptr() in storages:
            raise Fired("aliasing", f"{path} shares storage with input {storages[t.untyped_storage().data_ptr()]}: "
                                    "return a new tensor, not an input or a view of one")
    changed = [i for i, (b, t) in enumerate(zip(before, tensors(args), strict=True)) if not torch.equal(b, t)]
    if changed:
        raise Fired("mutated-input", f"the kernel overwrote its inputs {changed}; the reference sees them unchanged")
    return out, detach_copy(out)


def judge(expected: Pairs, got: Pairs, workload: Workload) -> Evidence:
    """The harness's verifier, with the failure named: precision, nan or mismatch."""
    for (path, r), (_, o) in zip(expected, got, strict=False):
        if r.dtype != o.dtype and _lower(o.dtype, r.dtype):
            raise Fired("precision", f"{path}: dtype {o.dtype} is below the reference's {r.dtype} "
                                     "(a precision downgrade)")
        if r.dtype == o.dtype and r.shape == o.shape and (narrow := _rounded_to(o, r)):
            raise Fired("precision", f"{path}: every value is a {narrow} value, the reference's are not "
                                     f"(computed in {narrow} and cast back to {r.dtype})")
        if o.is_floating_point() and r.shape == o.shape:
            extra = int((~torch.isfinite(o.double()) & torch.isfinite(r.double().to(o.device))).sum())
            if extra:
                raise Fired("nan", f"{path}: {extra} NaN/Inf values where the reference has finite ones")
    try:
        return compare(expected, got, workload)
    except VerificationError as exc:
        raise Fired("mismatch", str(exc)) from None


def _lower(out: torch.dtype, ref: torch.dtype) -> bool:
    if not out.is_floating_point:
        return ref.is_floating_point
    return ref.is_floating_point and torch.finfo(out).eps > torch.finfo(ref).eps


def _rounded_to(out: torch.Tensor, ref: torch.Tensor) -> str | None:
    """The narrower dtype every finite value of a float32/float64 ``out`` fits exactly while the
    reference's do not (a chance of 2^-16 an element for random values: 8 elements at least)."""
    if out.dtype not in (torch.float32, torch.float64) or out.numel() < ROUNDED_MIN_ELEMENTS:
        return None
    for narrow in NARROW_DTYPES:
        def fits(t: torch.Tensor, narrow: torch.dtype = narrow) -> bool:
            finite = t[torch.isfinite(t)]
            return bool(finite.numel()) and torch.equal(finite.to(narrow).to(t.dtype), finite)
        if fits(out) and not fits(ref.to(out.device)):
            return str(narrow).removeprefix("torch.")
    return None


def same(a: Pairs, b: Pairs) -> bool:
    """Bit-identical outputs."""
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype and torch.equal(x, y)
                                    for (_, x), (_, y) in zip(a, b, strict=True))


def refill(args: Sequence[Any], seed: int) -> None:
    """New values in place (addresses kept) for every tensor input, drawn like its own: floats from a
    normal of its mean and std, integers uniform over its range, booleans at its ratio."""
    with torch.no_grad():
        for i, t in enumerate(tensors(args)):
            if t.numel():
                gen = torch.Generator(device=t.device).manual_seed(seed + i)
                t.copy_(_draw(t, gen))


def _draw(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    if t.dtype == torch.bool:
        return torch.rand(t.shape, generator=gen, device=t.device) < t.float().mean()
    if not t.is_floating_point():
        return torch.randint(int(t.min()), int(t.max()) + 1, t.shape, generator=gen, device=t.device)
    x = t.float()
    std = float(x.std()) if x.numel() > 1 else 0.0
    return torch.randn(t.shape, generator=gen, device=t.device) * (std or 1.0) + float(x.mean())
