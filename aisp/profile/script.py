"""Run a Python script or module under torch.profiler and write its Chrome trace.

``python -m aisp.profile.script --trace OUT.json -- my_script.py [args]`` (or ``-- -m pkg [args]``):
the program runs as ``__main__`` with its own ``sys.argv``; CPU activity is recorded, and CUDA
activity where a GPU is present. The trace is written even when the program exits with an error,
and this process exits with the program's code.
"""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile


def run_program(program: list[str]) -> int:
    """Run ``program`` (``script.py args`` or ``-m module args``) as ``__main__``; its exit code."""
    try:
        if program[0] == "-m":
            sys.argv = program[1:]
            runpy.run_module(program[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = program
            runpy.run_path(program[0], run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run a Python program under torch.profiler.")
    ap.add_argument("--trace", type=Path, required=True, help="where the Chrome trace goes")
    ap.add_argument("program", nargs=argparse.REMAINDER, help="-- script.py [args] or -- -m module [args]")
    args = ap.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        ap.error("no program to run")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        code = run_program(program)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    prof.export_chrome_trace(str(args.trace))
    return code


if __name__ == "__main__":
    raise SystemExit(main())
