"""Check your own kernel against a reference with the harness's verifier, then time both.

    python ch20/kernel_check.py MODULE:FUNCTION --reference MODULE:FUNCTION --shapes SPEC [SPEC ...]
        [--dims NAME=N ...] [--random N] [--dtypes float32 bfloat16 ...] [--device auto|cpu|cuda]
        [--precision P] [--element-tol E] [--rtol R] [--seed S] [--iterations 20] [--warmup 5] [--no-time]

MODULE is an importable name (the working directory is on the path) or a .py file. Both functions
take the same tensors and return a tensor (or a tuple/list/dict of them). A SPEC is one call's
input shapes: tensors separated by ',' and dims by 'x'; a dim is an integer or a name bound by
--dims, so ``MxK,KxN --dims M=512 K=256 N=128`` keeps a matmul's K shared. ``--random N`` adds N
cases per spec with every name drawn in 1..its value (a spec of integers only runs once) (odd sizes find tile-tail bugs). Inputs are
N(0, 1) in each dtype. Each case is compared with ``aisp.harness.verify.compare``: shape, dtype,
NaN/Inf pattern, per-element and relative-L2 error at the harness's default tolerance for the
output's dtype (``--precision`` picks another row of that table; ``--element-tol``/``--rtol`` set
your own, relative: to the reference's largest |value| and to each value). Then every passing case
is timed with the harness's timer, kernel and reference interleaved (CUDA events on a GPU): medians and the speedup with its 95% interval.
Exit: 0 every case matches; 4 a case does not match; 5 the kernel or the reference raised; 2 bad
usage (one line on stderr).
Run: python ch20/kernel_check.py kernel_check_examples:softmax_two_pass \\
         --reference kernel_check_examples:softmax_reference --shapes RxC --dims R=64 C=1024 --random 4
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable

import torch
from kernel_check_inputs import DTYPES, Usage, cases, load, parse, parse_dims, parse_spec

from aisp.harness.benchmark import Workload, default_device
from aisp.harness.stats import paired_ratio
from aisp.harness.timing import time_call
from aisp.harness.verify import VerificationError, compare, detach_copy


def check(kernel: Callable, ref: Callable, shapes: list[tuple], dtype: torch.dtype, args: argparse.Namespace,
          device: torch.device) -> tuple[str, list[torch.Tensor] | None]:
    """('ok ...' | 'FAIL ...' | 'ERROR ...', the inputs when it matched)."""
    gen = torch.Generator(device=device).manual_seed(args.seed)
    inputs = [torch.randn(s, generator=gen, device=device).to(dtype) for s in shapes]
    try:
        expected = detach_copy(ref(*[x.clone() for x in inputs]))
    except Exception as exc:
        return f"ERROR reference raised {type(exc).__name__}: {exc}", None
    try:
        got = detach_copy(kernel(*[x.clone() for x in inputs]))
        evidence = compare(expected, got, Workload(precision=args.precision, element_tol=args.element_tol, rtol=args.rtol))
    except VerificationError as exc:
        return f"FAIL {exc}", None
    except Exception as exc:
        return f"ERROR kernel raised {type(exc).__name__}: {exc}", None
    return f"ok   max abs err {evidence.max_abs_err:.3g}, rel L2 {evidence.rel_l2_err:.3g}", inputs


def timing(kernel: Callable, ref: Callable, inputs: list[torch.Tensor], args: argparse.Namespace,
           device: torch.device) -> str:
    """Reference and kernel interleaved; medians and speedup (reference / kernel) [95% CI]."""
    samples: dict[Callable, list[float]] = {ref: [], kernel: []}
    for i in range(args.warmup + args.iterations):
        for fn in (ref, kernel) if i % 2 else (kernel, ref):
            ms = time_call(lambda f=fn: f(*inputs), device).ms
            if i >= args.warmup:
                samples[fn].append(ms)
    r = paired_ratio(samples[ref], samples[kernel], 2)
    med = {fn: sorted(s)[len(s) // 2] for fn, s in samples.items()}
    return f"reference {med[ref]:.4g} ms, kernel {med[kernel]:.4g} ms, {r.value:.2f}x [{r.low:.2f}, {r.high:.2f}]"


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse(sys.argv[1:] if argv is None else argv)
        kernel, ref = load(args.kernel), load(args.reference)
        dims = parse_dims(args.dims)
        all_cases = cases([parse_spec(s, dims) for s in args.shapes], dims, args.random, random.Random(args.seed))
    except Usage as exc:
        print(f"kernel_check: {exc}", file=sys.stderr)
        return 2
    device = default_device() if args.device == "auto" else torch.device(args.device)
    code = 0
    for shapes in all_cases:
        for name in args.dtypes:
            label = f"{','.join('x'.join(map(str, s)) for s in shapes)} {name}"
            verdict, inputs = check(kernel, ref, shapes, DTYPES[name], args, device)
            if inputs is not None and not args.no_time:
                verdict += "; " + timing(kernel, ref, inputs, args, device)
            print(f"{label:<28} {verdict}")
            code = max(code, 4 if verdict.startswith("FAIL") else 5 if verdict.startswith("ERROR") else 0)
    print({0: "all cases match", 4: "a case does not match", 5: "a call raised"}[code] + f" ({device.type})")
    return code


if __name__ == "__main__":
    sys.exit(main())
