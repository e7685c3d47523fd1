"""Verification: the optimized output must equal the baseline's before any timing counts.

Checks (each has a test that makes it fire): same structure, shape and dtype; NaN/Inf only where the
baseline has them; values within the precision's tolerance, per element and in relative L2; inputs unchanged
by ``run()``; output not sharing storage with a tensor that existed before ``run()``; and one timed call
drawn at random, before which scratch is poisoned and the declared inputs are refilled with new values, so
that an answer computed ahead no longer matches.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import numpy as np
import torch

from aisp.harness.benchmark import Benchmark, Workload

TOLERANCES: dict[str, tuple[float, float, float]] = {
    "exact": (0.0, 0.0, 0.0), "int8": (0.0, 0.0, 5e-2), "fp64": (1e-7, 1e-9, 5e-8), "fp32": (1e-4, 3e-4, 5e-5),
    "tf32": (1e-2, 3e-3, 5e-3), "fp16": (1e-2, 3e-3, 5e-3), "bf16": (5e-2, 2e-2, 2e-2), "fp8": (0.15, 5e-2, 0.1),
}
"""(rtol, atol, max_rel_l2) per precision, what two correct implementations can differ by: per element
``|o - r| <= atol * rms(r) + rtol * |r|`` (atol scaled to the reference, which may be 1e3 or 1e-6); per
tensor ``||o - r|| / ||r|| <= max_rel_l2`` (a bias each element hides within rtol), 5-200x above two
correct GEMMs (bf16 ~3e-3, fp16 ~4e-4, fp32 ~3e-7). fp32 atol: two fp32 GEMM shapes on an H200
(ch01:performance, batched vs per-sample) differed by 6e-5 x rms near zero on refilled inputs.
A workload's own atol is absolute."""
DTYPE_PRECISION = {
    torch.float64: "fp64", torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
    torch.float8_e4m3fn: "fp8", torch.float8_e5m2: "fp8",
}
CLONE_LIMIT_BYTES = 512 << 20
"""Inputs up to this size are cloned for the mutation check; larger ones are fingerprinted."""


class VerificationError(AssertionError):
    """The optimized variant does not compute what the baseline computes."""


@dataclass
class Evidence:
    """What verification measured: the largest errors seen and the tolerance applied."""

    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    rel_l2_err: float = 0.0
    rtol: float = 0.0
    atol: float = 0.0
    max_rel_l2: float = 0.0
    checks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def merge(self, other: Evidence) -> None:
        self.max_abs_err = max(self.max_abs_err, other.max_abs_err)
        self.max_rel_err = max(self.max_rel_err, other.max_rel_err)
        self.rel_l2_err = max(self.rel_l2_err, other.rel_l2_err)
        self.rtol, self.atol, self.max_rel_l2 = other.rtol, other.atol, other.max_rel_l2

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def flatten(output: Any, path: str = "output") -> Iterator[tuple[str, torch.Tensor]]:
    """(path, tensor) for every tensor in a tensor, number, array or nested list/tuple/dict."""
    if isinstance(output, torch.Tensor):
        yield path, output
    elif isinstance(output, dict):
        for key in sorted(output, key=str):
            yield from flatten(output[key], f"{path}[{key!r}]")
    elif isinstance(output, (list, tuple)):
        for i, item in enumerate(output):
            yield from flatten(item, f"{path}[{i}]")
    elif isinstance(output, np.ndarray):
        yield path, torch.from_numpy(output)
    elif isinstance(output, (int, float, bool)):
        yield path, torch.tensor(output)
    elif output is None:
        raise VerificationError(f"{path} is None: run() must return what it computed")
    else:
        raise VerificationError(f"{path} has type {type(output).__name__}; return tensors, numbers or arrays")


def detach_copy(output: Any) -> list[tuple[str, torch.Tensor]]:
    """A private copy of an output, safe from later runs that reuse its buffers."""
    return [(p, t.detach().clone()) for p, t in flatten(output)]


def tolerance(workload: Workload, dtype: torch.dtype, rms: float = 1.0) -> tuple[float, float, float]:
    """(rtol, atol, max_rel_l2) for a reference of this dtype and RMS: the workload's, else defaults."""
    if not (dtype.is_floating_point or dtype.is_complex):
        return TOLERANCES["exact"]
    rtol, atol, l2 = TOLERANCES[workload.precision or DTYPE_PRECISION.get(dtype, "fp32")]
    return (workload.rtol if workload.rtol is not None else rtol,
            workload.atol if workload.atol is not None else atol * max(rms, torch.finfo(dtype).tiny),
            workload.max_rel_l2 if workload.max_rel_l2 is not None else l2)


def compare(ref: list[tuple[str, torch.Tensor]], out: list[tuple[str, torch.Tensor]],
            workload: Workload) -> Evidence:
    """Raise VerificationError unless ``out`` matches ``ref``; return the error evidence."""
    if [p for p, _ in ref] != [p for p, _ in out]:
        raise VerificationError(f"output structure differs: baseline {[p for p, _ in ref]}, "
                                f"optimized {[p for p, _ in out]}")
    evidence = Evidence()
    for (path, r), (_, o) in zip(ref, out, strict=True):
        if r.shape != o.shape:
            raise VerificationError(f"{path}: shape {tuple(o.shape)}, baseline {tuple(r.shape)}")
        if r.dtype != o.dtype:
            raise VerificationError(f"{path}: dtype {o.dtype}, baseline {r.dtype}")
        evidence.merge(_compare_tensor(path, r, o, workload))
    return evidence


def _compare_tensor(path: str, r: torch.Tensor, o: torch.Tensor, workload: Workload) -> Evidence:
    if not (r.dtype.is_floating_point or r.dtype.is_complex):
        mismatched = int((r != o.to(r.device)).sum())
        if mismatched:
            raise VerificationError(f"{path}: {mismatched} of {r.numel()} elements differ (exact match required)")
        return Evidence()
    r64, o64 = r.detach().double(), o.detach().to(r.device).double()
    r_bad, o_bad = ~torch.isfinite(r64), ~torch.isfinite(o64)
    extra = int((o_bad & ~r_bad).sum())
    if extra:
        raise VerificationError(f"{path}: {extra} NaN/Inf values where the baseline has finite ones")
    if not torch.equal(r_bad, o_bad) or not torch.equal(r64[r_bad].nan_to_num(), o64[o_bad].nan_to_num()):
        raise VerificationError(f"{path}: NaN/Inf pattern differs from the baseline's")
    diff, ref_abs = (o64 - r64)[~r_bad].abs(), r64[~r_bad].abs()
    norm = float(ref_abs.norm())
    rtol, atol, max_l2 = tolerance(workload, r.dtype, norm / max(ref_abs.numel(), 1) ** 0.5)
    evidence = Evidence(rtol=rtol, atol=atol, max_rel_l2=max_l2)
    if not diff.numel():
        return evidence
    evidence.max_abs_err = float(diff.max())
    evidence.max_rel_err = float((diff / ref_abs.clamp_min(1e-30)).max())
    evidence.rel_l2_err = float(diff.norm()) / norm if norm > 0 else float(diff.norm())
    bad = diff > atol + rtol * ref_abs
    if bool(bad.any()):
        worst = int(diff.argmax())
        raise VerificationError(
            f"{path}: {int(bad.sum())} of {diff.numel()} elements outside tolerance "
            f"(rtol={rtol:g}, atol={atol:.3g}); max abs error {evidence.max_abs_err:.3g}, "
            f"max rel error {evidence.max_rel_err:.3g} (baseline {float(r64[~r_bad][worst]):.6g}, "
            f"optimized {float(o64[~r_bad][worst]):.6g})")
    if norm > 0 and evidence.rel_l2_err > max_l2:
        raise VerificationError(f"{path}: relative L2 error {evidence.rel_l2_err:.3g} exceeds {max_l2:g} "
                                "although each element is within tolerance: the whole tensor is off")
    return evidence


def _covered(name: str, names: tuple[str, ...]) -> bool:
    head = name.split(".", 1)[0].split("[", 1)[0]
    return head in names


def tensor_attributes(bench: Benchmark) -> dict[str, torch.Tensor]:
    """Every tensor the benchmark holds: plain attributes, items of lists/tuples/dicts, and the
    parameters and buffers of module attributes (named ``attr.param``)."""
    found: dict[str, torch.Tensor] = {}
    for name, value in vars(bench).items():
        if isinstance(value, torch.Tensor):
            found[name] = value
        elif isinstance(value, torch.nn.Module):
            for sub, t in [*value.named_parameters(), *value.named_buffers()]:
                found[f"{name}.{sub}"] = t
        elif isinstance(value, (list, tuple)):
            found.update({f"{name}[{i}]": t for i, t in enumerate(value) if isinstance(t, torch.Tensor)})
        elif isinstance(value, dict):
            found.update({f"{name}[{k!r}]": t for k, t in value.items() if isinstance(t, torch.Tensor)})
    return found


def inputs_of(bench: Benchmark) -> dict[str, torch.Tensor]:
    """The tensors run() must leave unchanged: all but those named in scratch or state."""
    declared = tuple(bench.scratch) + tuple(bench.state)
    return {n: t for n, t in tensor_attributes(bench).items() if not _covered(n, declared)}


def fingerprint(t: torch.Tensor) -> tuple[Any, ...]:
    """Sums that change when any element of ``t`` does (for tensors too large to clone)."""
    flat = _real(t).reshape(-1).double()
    weights = torch.arange(1, flat.numel() + 1, device=flat.device, dtype=torch.float64).remainder_(8191)
    return float(flat.nan_to_num().sum()), float((flat.nan_to_num() * weights).sum()), int(flat.isnan().sum())


def _unchanged(before: Any, t: torch.Tensor) -> bool:
    """Bit-identical to the snapshot (fp8 too), or the same fingerprint."""
    if not isinstance(before, torch.Tensor):
        return before == fingerprint(t)
    bits = [x.detach().contiguous().reshape(-1).view(torch.uint8) for x in (before, t)]
    return before.shape == t.shape and torch.equal(*bits)


def _storage_key(t: torch.Tensor) -> tuple[str, int]:
    return (str(t.device), t.untyped_storage().data_ptr())


def preexisting_storages(bench: Benchmark) -> dict[tuple[str, int], str]:
    """Storages of the non-scratch tensors the benchmark holds now (before a run)."""
    return {_storage_key(t): n for n, t in tensor_attributes(bench).items()
            if not _covered(n, tuple(bench.scratch)) and t.untyped_storage().nbytes()}


def check_fresh(output: Any, before: dict[tuple[str, int], str]) -> None:
    """Raise if ``run()`` returned a tensor that shares storage with one that existed before the
    call: an input or a view of one (aliasing), or an answer computed in setup() or an earlier call."""
    for path, t in flatten(output):
        name = before.get(_storage_key(t)) if t.untyped_storage().nbytes() else None
        if name is not None:
            raise VerificationError(
                f"{path} shares storage with '{name}', a tensor that existed before run() was called. "
                "run() must return what it computed: not an input or a view of one (aliasing), nor an "
                "answer computed in setup() or an earlier call. List a reused output buffer in `scratch`.")


class CallGuard:
    """Taken right before a verified call: snapshots the inputs and the storages that exist."""

    def __init__(self, bench: Benchmark) -> None:
        self.bench, self.before = bench, preexisting_storages(bench)
        self.snapshots = {n: t.detach().clone() if t.numel() * t.element_size() <= CLONE_LIMIT_BYTES
                          else fingerprint(t) for n, t in inputs_of(bench).items()}

    def changed(self) -> list[str]:
        now = inputs_of(self.bench)
        return [n for n, before in self.snapshots.items() if n in now and not _unchanged(before, now[n])]

    def check(self, output: Any) -> list[tuple[str, torch.Tensor]]:
        """A copy of the call's output, once it is shown fresh and the inputs unchanged."""
        check_fresh(output, self.before)
        if changed := self.changed():
            raise VerificationError(f"run() changed its inputs {changed}: list buffers it overwrites in "
                                    "`scratch` and state it updates in `state`, or leave inputs alone")
        return detach_copy(output)

    def settle(self, output: Any, originals: dict[str, torch.Tensor]) -> Callable[[], Any]:
        """Check the call now, then put back the input values the refill replaced (the calls after
        it time the workload's own data: input-dependent paths keep their mix); the thunk returns
        the output copy or raises the check's error."""
        try:
            result: Any = self.check(output)
        except VerificationError as exc:
            result = exc
        with torch.no_grad():
            for name, t in declared_inputs(self.bench).items():
                _real(t).copy_(_real(originals[name]))
        return partial(_raise_or_return, result)


def _raise_or_return(result: Any) -> Any:
    if isinstance(result, VerificationError):
        raise result
    return result


def _real(t: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(t.detach()) if t.is_complex() else t.detach()


def declared_inputs(bench: Benchmark) -> dict[str, torch.Tensor]:
    """The tensors under the names in ``bench.inputs`` (a list's items, a module's parameters)."""
    found = {n: t for n, t in tensor_attributes(bench).items() if _covered(n, tuple(bench.inputs))}
    for name in bench.inputs:
        if not any(_covered(n, (name,)) for n in found):
            raise VerificationError(f"`inputs` names '{name}', which holds no tensor")
    return found


def input_signature(bench: Benchmark) -> dict[str, str]:
    """Shape, dtype and device of each declared input."""
    return {n: f"{tuple(t.shape)} {t.dtype} on {t.device.type}" for n, t in declared_inputs(bench).items()}


def match_inputs(signature: dict[str, str], bench: Benchmark) -> None:
    """Raise unless this variant declares the inputs of the baseline's ``signature``."""
    mine = input_signature(bench)
    for name in sorted(set(signature) | set(mine)):
        if mine.get(name) != signature.get(name):
            raise VerificationError(f"declared input '{name}': {mine.get(name, 'not declared')} here, "
                                    f"{signature.get(name, 'not declared')} in the baseline")


def refill(bench: Benchmark, seed: int) -> None:
    """New values in place for every declared input, from ``seed`` and its own statistics (floats:
    normal of its mean and std, or |mean| or 1; integers: uniform over its range; booleans: its ratio),
    so variants holding the same inputs get the same values; addresses keep (CUDA graphs)."""
    with torch.no_grad():
        for i, t in enumerate(t for _, t in sorted(declared_inputs(bench).items()) if t.numel()):
            _real(t).copy_(_draw(_real(t), torch.Generator(device=t.device).manual_seed(seed + i)))


def _draw(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    if x.dtype == torch.bool:
        return torch.rand(x.shape, generator=gen, device=x.device) < x.float().mean()
    if not x.is_floating_point():
        return torch.randint(int(x.min()), int(x.max()) + 1, x.shape, generator=gen, device=x.device)
    finite = x.float()[torch.isfinite(x.float())]
    mean, std = (float(finite.mean()), float(finite.std())) if finite.numel() > 1 else (0.0, 0.0)
    values = torch.randn(x.shape, generator=gen, device=x.device).mul_(std or max(abs(mean), 1.0)).add_(mean)
    return values.clamp_(torch.finfo(x.dtype).min, torch.finfo(x.dtype).max) if x.dtype.itemsize < 4 else values


@dataclass(frozen=True)
class CheckPlan:
    """A pair run's secrets, drawn by the runner for every process of the pair: the seed of the
    extra verification pass (never the main one), the seed of the values the declared inputs get
    before the checked call, and which timed iteration that is (not announced, not always last)."""

    fresh_seed: int
    refill_seed: int
    at: int

    @classmethod
    def draw(cls, seed: int, iterations: int) -> CheckPlan:
        rng = random.SystemRandom()
        return cls(seed + rng.randrange(1, 2**31), rng.randrange(2**31), rng.randrange(iterations))

    def prepare(self, bench: Benchmark, known: set[str]) -> tuple[CallGuard, dict[str, torch.Tensor]]:
        """Before the checked call, outside the window: keep the inputs' values, poison scratch,
        refill the inputs, snapshot. Returns the guard and the kept values (for ``settle``)."""
        originals = {name: t.detach().clone() for name, t in declared_inputs(bench).items()}
        poison_scratch(bench, known)
        refill(bench, self.refill_seed)
        return CallGuard(bench), originals


def poison_scratch(bench: Benchmark, known: set[str]) -> None:
    """Overwrite scratch buffers, and tensors created after setup, with garbage (NaN for floats);
    modules and ``state`` are left alone.

    ``known`` holds the tensor names present right after setup. A variant whose ``run()`` really
    recomputes its output is unaffected; one that skips work after warmup returns the garbage.
    """
    for name, t in tensor_attributes(bench).items():
        in_module = "." in name.split("[", 1)[0]
        if not in_module and not _covered(name, tuple(bench.state)) and (
                _covered(name, tuple(bench.scratch)) or name not in known):
            with torch.no_grad():
                _fill_garbage(t)


def _fill_garbage(t: torch.Tensor) -> None:
    if t.is_floating_point() or t.is_complex():
        t.fill_(math.nan)
    elif t.dtype == torch.bool:
        t.logical_not_()
    else:
        t.bitwise_not_()
