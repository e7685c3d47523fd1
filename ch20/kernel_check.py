"""Check your own kernel against a reference with the harness's verifier, then time both: a thin
command line over ``aisp.check`` (the same as ``aisp check``, with this chapter's option spelling).

    python ch20/kernel_check.py MODULE:FUNCTION --reference MODULE:FUNCTION --shapes SPEC [SPEC ...]
        [--dims NAME=N ...] [--random N] [--edges] [--dtypes float32 bfloat16 ...] [--device auto|cpu|cuda]
        [--precision P] [--element-tol E] [--rtol R] [--seed S] [--iterations 20] [--warmup 5] [--no-time] [--json PATH]

Every option is described in ``--help``. Exit: 0 every case matches; 4 a case does not match (or a
check fired: cached answer, precision downgrade, aliasing, NaN/Inf, unjoined stream); 5 the kernel
or the reference raised; 2 bad usage (one line on stderr).
Run: python ch20/kernel_check.py kernel_check_examples:softmax_two_pass \\
         --reference kernel_check_examples:softmax_reference --shapes RxC --dims R=64 C=1024 --random 4
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aisp.check import CheckOptions, Usage, check_named
from aisp.check.inputs import DTYPES
from aisp.check.report import render
from aisp.harness.artifacts import atomic_write_text
from aisp.harness.verify import TOLERANCES


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line instead of argparse's usage block
        raise Usage(message)


def parse(argv: list[str]) -> argparse.Namespace:
    p = Parser(prog="kernel_check", description="Check a kernel against a reference with the harness's "
               "verifier over shapes and dtypes, then time both.", epilog="Exit: 0 every case matches; 4 a "
               "case does not match; 5 the kernel or the reference raised; 2 bad usage.")
    p.add_argument("kernel", help="MODULE:FUNCTION: an importable module (the working directory is on the path) "
                   "or a .py file; takes tensors, returns a tensor or a tuple/list/dict of them")
    p.add_argument("--reference", required=True, help="MODULE:FUNCTION of the reference, same arguments")
    p.add_argument("--shapes", nargs="+", required=True, metavar="SPEC",
                   help="one call's input shapes per SPEC: tensors joined by ',', dims by 'x'; a dim is an "
                   "integer or a name bound by --dims (MxK,KxN)")
    p.add_argument("--dims", nargs="*", default=[], metavar="NAME=N", help="bind the names used in --shapes")
    p.add_argument("--random", type=int, default=0, metavar="N",
                   help="N more cases per spec, each name drawn in 1..its value (odd sizes find tail bugs)")
    p.add_argument("--edges", action="store_true", help="cases with every name at 1 and at its value + 1")
    p.add_argument("--dtypes", nargs="+", default=["float32"], help=f"input dtypes: {', '.join(DTYPES)}")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="auto: CUDA when present")
    p.add_argument("--precision", choices=sorted(TOLERANCES), default=None,
                   help="judge with this row of the harness's tolerance table, not the output dtype's")
    p.add_argument("--element-tol", type=float, default=None,
                   help="your own element tolerance, relative to the reference's largest |value|")
    p.add_argument("--rtol", type=float, default=None, help="your own relative tolerance")
    p.add_argument("--seed", type=int, default=0, help="seed of the inputs and the random sizes")
    p.add_argument("--iterations", type=int, default=20, help="timed calls of each function (>= 2)")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls of each function first")
    p.add_argument("--no-time", action="store_true", help="verify only")
    p.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the result as JSON")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse(sys.argv[1:] if argv is None else argv)
        options = CheckOptions(device=args.device, seed=args.seed, random=args.random, edges=args.edges,
                               iterations=args.iterations, warmup=args.warmup, time=not args.no_time,
                               precision=args.precision, element_tol=args.element_tol, rtol=args.rtol)
        result = check_named(args.kernel, args.reference, args.shapes, args.dims, args.dtypes, options)
    except Usage as exc:
        print(f"kernel_check: {exc}", file=sys.stderr)
        return 2
    print(render(result))
    if args.json is not None:
        atomic_write_text(args.json, result.to_json())
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
