"""Verification: the optimized output must equal the baseline's before any timing counts.

Checks (each has a test that makes it fire): same structure, shape and dtype; NaN/Inf only where the
baseline has them; values within the precision's tolerance (relative L2, then a tail test per element
in units of the precision's rounding; and, where the baseline supplies a higher-precision
``reference()``, the optimized error against it no worse than the baseline's own: see tolerance.py);
inputs unchanged by ``run()``; output not sharing storage with a tensor that existed before ``run()``;
and one timed call drawn at random, before which scratch is poisoned and the declared inputs are refilled with new values, so
that an answer computed ahead no longer matches.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch

from aisp.harness.benchmark import Benchmark, Workload
from aisp.harness.tolerance import TOLERANCES as TOLERANCES
from aisp.harness.tolerance import Evidence as Evidence
from aisp.harness.tolerance import VerificationError as VerificationError
from aisp.harness.tolerance import as_double, compare_tensor, differential, real_view, tolerance

CLONE_LIMIT_BYTES = 512 << 20
"""Inputs up to this size are cloned for the mutation check; larger ones are fingerprinted."""


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


def compare(ref: list[tuple[str, torch.Tensor]], out: list[tuple[str, torch.Tensor]],
            workload: Workload, high: list[tuple[str, torch.Tensor]] | None = None) -> Evidence:
    """Raise VerificationError unless ``out`` matches ``ref``; return the error evidence. ``high``:
    the baseline's higher-precision ``reference()`` on the same inputs, for the differential test."""
    if [p for p, _ in ref] != [p for p, _ in out]:
        raise VerificationError(f"output structure differs: baseline {[p for p, _ in ref]}, "
                                f"optimized {[p for p, _ in out]}")
    if high is not None and [p for p, _ in high] != [p for p, _ in ref]:
        raise VerificationError(f"the baseline's reference() returns {[p for p, _ in high]}, "
                                f"its run() {[p for p, _ in ref]}")
    evidence = Evidence()
    for i, ((path, r), (_, o)) in enumerate(zip(ref, out, strict=True)):
        if r.shape != o.shape:
            raise VerificationError(f"{path}: shape {tuple(o.shape)}, baseline {tuple(r.shape)}")
        if r.dtype != o.dtype:
            raise VerificationError(f"{path}: dtype {o.dtype}, baseline {r.dtype}")
        evidence.merge(compare_tensor(path, r, o, workload))
        if high is not None and (r.dtype.is_floating_point or r.dtype.is_complex):
            differential(path, r, o, high[i][1], tolerance(workload, r.dtype).unit)
    return evidence


def high_precision(bench: Benchmark) -> list[tuple[str, torch.Tensor]] | None:
    """The baseline's ``reference()`` (its math in fp32/fp64 on the inputs of the call just made),
    as fp64 tensors; None when the baseline supplies none."""
    reference = bench.reference()
    return None if reference is None else [(p, as_double(t)) for p, t in flatten(reference)]


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


def _held_tensors(value: Any, depth: int = 2) -> list[torch.Tensor]:
    """Tensors an attribute holds: itself, a module's parameters, their gradients and its buffers, an
    optimizer's state, and those of list, tuple and dict items (``depth`` levels down)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, torch.nn.Module):
        params = list(value.parameters())
        return [*params, *(p.grad for p in params if p.grad is not None), *value.buffers()]
    if isinstance(value, torch.optim.Optimizer):
        return [t for state in value.state.values() for t in state.values() if isinstance(t, torch.Tensor)]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return [t for item in items for t in _held_tensors(item, depth - 1)] if depth > 0 else []


def held_bytes(bench: Benchmark, device_type: str) -> int:
    """Bytes of the distinct storages on ``device_type`` that the benchmark's attributes hold (see
    :func:`_held_tensors`): what the harness adds to a variant's setup bytes as state its calls grew
    (gradients, an optimizer's moments, buffers made on the first call)."""
    storages = {}
    for value in vars(bench).values():
        for t in _held_tensors(value):
            if t.device.type != device_type:
                continue
            try:
                storage = t.untyped_storage()
            except (RuntimeError, NotImplementedError):  # sparse and other layouts without one storage
                continue
            storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def inputs_of(bench: Benchmark) -> dict[str, torch.Tensor]:
    """The tensors run() must leave unchanged: all but those named in scratch or state."""
    declared = tuple(bench.scratch) + tuple(bench.state)
    return {n: t for n, t in tensor_attributes(bench).items() if not _covered(n, declared)}


def fingerprint(t: torch.Tensor) -> tuple[Any, ...]:
    """Sums that change when any element of ``t`` does (for tensors too large to clone)."""
    flat = real_view(t).reshape(-1).double()
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
                real_view(t).copy_(real_view(originals[name]))
        return partial(_raise_or_return, result)


def _raise_or_return(result: Any) -> Any:
    if isinstance(result, VerificationError):
        raise result
    return result


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
            real_view(t).copy_(_draw(real_view(t), torch.Generator(device=t.device).manual_seed(seed + i)))


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
