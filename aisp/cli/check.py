"""``aisp check KERNEL --reference REF --shapes SPEC``: your kernel against a reference, verified by
the harness's verifier over shapes, edge sizes, random sizes and dtypes, then timed (see
``aisp.check``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from aisp.harness.artifacts import atomic_write_text

Precision = Literal["exact", "int8", "fp64", "fp32", "tf32", "fp16", "bf16", "fp8"]
"""The rows of the harness's tolerance table (``aisp.harness.verify.TOLERANCES``; a test keeps them equal):
written here so that ``aisp --help`` does not import torch."""
DEFAULTS = {"device": "auto", "seed": 0, "iterations": 20, "warmup": 5}
"""``aisp.check.CheckOptions``' defaults of the options below (a test keeps them equal), for the same reason."""

EXIT_HELP = ("Exit codes: 0 every case matches (and the speedup clears --min-speedup); 1 every case "
             "matches but the speedup's interval falls under --min-speedup; 2 bad usage (one line on stderr); "
             "4 a case does not match (mismatch, cached answer, precision downgrade, output aliasing an "
             "input, overwritten inputs, NaN/Inf, work on an unjoined stream); 5 the kernel or the reference raised.")


def check(
    kernel: Annotated[str, typer.Argument(help="MODULE:FUNCTION (a module on the path or a .py file).")],
    reference: Annotated[str, typer.Option("--reference", "-r", help="MODULE:FUNCTION of the reference.")],
    shapes: Annotated[list[str], typer.Option("--shapes", "-s", help="One call's input shapes, e.g. MxK,KxN "
                                              "(repeatable).")],
    dims: Annotated[list[str] | None, typer.Option("--dims", "-d", help="NAME=N binding a named dim "
                                                   "(repeatable).")] = None,
    dtypes: Annotated[list[str] | None, typer.Option("--dtypes", help="float32, bf16, fp16, fp64 "
                                                     "(repeatable; default float32).")] = None,
    random: Annotated[int, typer.Option(help="Random cases per spec, each name drawn in 1..its value.")] = 3,
    edges: Annotated[bool, typer.Option(help="Cases with every name at 1 and at its value + 1.")] = True,
    device: Annotated[Literal["auto", "cpu", "cuda"], typer.Option(help="Where both run: CUDA when present (auto), "
                                                                   "or forced.")] = DEFAULTS["device"],
    seed: Annotated[int, typer.Option(help="Seed of the inputs and sizes.")] = DEFAULTS["seed"],
    iterations: Annotated[int, typer.Option(help="Timed calls of each function.")] = DEFAULTS["iterations"],
    warmup: Annotated[int, typer.Option(help="Untimed calls first.")] = DEFAULTS["warmup"],
    time: Annotated[bool, typer.Option(help="Time the matching cases (--no-time: verify only).")] = True,
    precision: Annotated[Precision | None, typer.Option(help="Tolerance row of the harness's table, instead of "
                                                        "the one of the output's dtype.")] = None,
    element_tol: Annotated[float | None, typer.Option(help="Your own element tolerance, relative to the reference's largest |value|.")] = None,
    rtol: Annotated[float | None, typer.Option(help="Your own relative tolerance.")] = None,
    min_speedup: Annotated[float | None, typer.Option(help="Exit 1 unless the speedup's 95% interval "
                                                      "starts at or above this.")] = None,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the result as JSON here.")] = None,
) -> None:
    """Verify your kernel against a reference over shapes and dtypes, then time both."""
    from aisp.check import CheckOptions, Usage, check_named
    from aisp.check.report import render

    try:
        options = CheckOptions(device=device, seed=seed, random=random, edges=edges, iterations=iterations,
                               warmup=warmup, time=time, precision=precision, element_tol=element_tol, rtol=rtol,
                               min_speedup=min_speedup)
        result = check_named(kernel, reference, shapes, dims or [], dtypes or ["float32"], options)
    except Usage as exc:
        typer.secho(f"error: {exc}", err=True, fg="red")
        raise typer.Exit(2) from None
    typer.echo(render(result))
    if json_path is not None:
        atomic_write_text(json_path, result.to_json())
    raise typer.Exit(result.exit_code)
