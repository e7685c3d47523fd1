"""``aisp.check(fn, ref, ...)``: your kernel against a reference, verified by the harness's verifier
over shapes and dtypes, then timed with the harness's timer and paired-ratio interval.

Per case: the reference's answer on private copies of the inputs; the kernel called on the inputs
themselves and checked (aliasing, overwritten inputs, NaN/Inf, precision, the verifier's tolerance);
the inputs refilled in place and both called again (an output that does not change, or no longer
matches, is a cached answer); then timing, with one timed call drawn at random checked on refilled
inputs and the host clock compared with the CUDA events (work on an unjoined stream)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from aisp.check.calls import Fired, guarded, judge, reference, refill, same
from aisp.check.clock import time_pair
from aisp.check.inputs import Usage, cases, load, parse_dims, parse_dtypes, parse_spec
from aisp.check.result import CaseResult, CheckResult, summarize
from aisp.harness.benchmark import Workload, default_device
from aisp.harness.verify import TOLERANCES


@dataclass(frozen=True)
class CheckOptions:
    """How a check runs; the defaults are the CLI's."""

    device: str = "auto"
    """auto (CUDA when present), cpu or cuda."""
    seed: int = 0
    """Seed of the inputs and of the random sizes."""
    random: int = 0
    """Extra cases per shape spec, each named dim drawn in 1..its value."""
    edges: bool = False
    """Extra cases per shape spec with every named dim at 1 and at its value + 1."""
    iterations: int = 20
    """Timed calls of each function."""
    warmup: int = 5
    """Untimed calls of each function first."""
    time: bool = True
    """Time the cases that match (False: verify only)."""
    precision: str | None = None
    """A row of the harness's tolerance table instead of the one of the output's dtype."""
    element_tol: float | None = None
    """Your own element tolerance, relative to the reference's largest |value| (as in a Workload)."""
    rtol: float | None = None
    """Your own relative tolerance."""
    min_speedup: float | None = None
    """The check is ``slower`` (exit 1) when the headline interval's low end is under this."""

    def __post_init__(self) -> None:
        if self.device not in ("auto", "cpu", "cuda"):
            raise Usage(f"device '{self.device}': use auto, cpu or cuda")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise Usage("device cuda, but torch sees no GPU")
        if self.random < 0 or self.warmup < 0 or self.iterations < 2:
            raise Usage("random and warmup must be >= 0, iterations >= 2 (--random, --warmup, --iterations)")
        if self.precision is not None and self.precision not in TOLERANCES:
            raise Usage(f"unknown precision '{self.precision}' (known: {', '.join(sorted(TOLERANCES))})")

    @property
    def workload(self) -> Workload:
        return Workload(precision=self.precision, element_tol=self.element_tol, rtol=self.rtol)


Inputs = Sequence[Any]


def check(fn: Callable, ref: Callable, inputs: Inputs | list[Inputs] | None = None, *,
          shapes: str | list[str] | None = None, dims: dict[str, int] | list[str] | None = None,
          dtypes: Sequence[str] = ("float32",), options: CheckOptions = CheckOptions()) -> CheckResult:
    """Verify ``fn`` against ``ref``, then time both; returns a frozen :class:`CheckResult`.

    ``inputs``: the arguments of one call (a tensor, or a tuple of tensors and other values), or a
    list of such tuples for several cases; they are copied, never changed. Or ``shapes``: specs such
    as ``"MxK,KxN"`` with ``dims`` ``{"M": 512, ...}``, drawn N(0, 1) in each of ``dtypes``.
    Raises :class:`Usage` on bad arguments."""
    device = default_device() if options.device == "auto" else torch.device(options.device)
    results = [run_case(fn, ref, args, device, options) for args in _case_inputs(inputs, shapes, dims, dtypes,
                                                                                   options, device)]
    return summarize(results, device.type, options.min_speedup)


def _case_inputs(inputs: Inputs | list[Inputs] | None, shapes: str | list[str] | None,
                 dims: dict[str, int] | list[str] | None, dtypes: Sequence[str], options: CheckOptions,
                 device: torch.device) -> list[list[Any]]:
    if (inputs is None) == (shapes is None):
        raise Usage("give either inputs or shapes")
    if inputs is not None:
        many = isinstance(inputs, list) and inputs and all(isinstance(x, (tuple, list)) for x in inputs)
        groups = inputs if many else [inputs if isinstance(inputs, (tuple, list)) else (inputs,)]
        return [[x.detach().clone() if isinstance(x, torch.Tensor) else x for x in g] for g in groups]
    bound = parse_dims(dims) if isinstance(dims, list) else dict(dims or {})
    specs = [parse_spec(s, bound) for s in ([shapes] if isinstance(shapes, str) else shapes)]
    gen = torch.Generator(device=device).manual_seed(options.seed)
    return [[torch.randn(s, generator=gen, device=device).to(dtype) for s in case]
            for case in cases(specs, bound, options.random, random.Random(options.seed), options.edges)
            for dtype in parse_dtypes(dtypes)]


def run_case(fn: Callable, ref: Callable, args: list[Any], device: torch.device,
             options: CheckOptions) -> CaseResult:
    """One case, verified then (when it matches and ``options.time``) timed."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    shapes = tuple(tuple(t.shape) for t in tensors)
    dtype = ",".join(dict.fromkeys(str(t.dtype).removeprefix("torch.") for t in tensors)) or "-"
    try:
        evidence, checks = verify_case(fn, ref, args, device, options.workload, options.seed)
        timing = (time_pair(fn, ref, args, options.workload, device, options.warmup, options.iterations)
                  if options.time else None)
    except Fired as exc:
        verdict = "error" if exc.check == "raised" else "verify-failed"
        return CaseResult(shapes, dtype, verdict, exc.reason, exc.check)
    if timing is not None:
        checks += ("checked-timed-call",) + (("unjoined-stream",) if device.type == "cuda" else ())
    return CaseResult(shapes, dtype, "ok", "", "", evidence.max_abs_err, evidence.rel_l2_err, checks,
                      timing and timing.ref_ms, timing and timing.fn_ms, timing and timing.speedup)


def verify_case(fn: Callable, ref: Callable, args: list[Any], device: torch.device, workload: Workload,
                seed: int) -> tuple[Any, tuple[str, ...]]:
    """Three verified calls: two on the same values, one after the inputs are refilled in place;
    raises :class:`Fired` when a check fires. Returns the worse evidence and the checks passed."""
    expected = reference(ref, args, device)
    first = judge(expected, guarded(fn, args, device)[1], workload)
    got = guarded(fn, args, device)[1]  # a repeat on the same values: still the same answer
    judge(expected, got, workload)
    refill(args, seed + 7919)
    expected_new = reference(ref, args, device)
    got_new = guarded(fn, args, device)[1]
    if same(got_new, got) and not same(expected_new, expected):
        raise Fired("cached-answer", "the output did not change when the inputs did (a cached answer)")
    try:
        second = judge(expected_new, got_new, workload)
    except Fired as exc:
        raise Fired("cached-answer" if exc.check == "mismatch" else exc.check,
                    f"after the inputs were refilled in place: {exc.reason}") from None
    worse = first if first.rel_l2_err >= second.rel_l2_err else second
    return worse, ("aliasing", "mutated-input", "nan", "precision", "tolerance", "refilled-inputs")


def check_named(kernel: str, ref: str, shapes: list[str], dims: list[str], dtypes: Sequence[str],
                options: CheckOptions) -> CheckResult:
    """``check`` on functions named ``MODULE:FUNCTION`` (a module or a .py file), dims as
    ``NAME=N`` strings: what the command lines and the MCP sandbox call."""
    bound = parse_dims(dims)
    parse_dtypes(dtypes)
    fn, reference_fn = load(kernel), load(ref)
    return check(fn, reference_fn, shapes=shapes, dims=bound, dtypes=dtypes, options=options)
