"""``aisp system``: host audit, tuning and manifest checks (chapter 3). Each command calls one core function."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aisp.system.audit import EXIT_CODES_HELP
from aisp.system.commands import AuditOptions, TuneOptions, audit_main, manifest_main, tune_main
from aisp.system.model import Profile

app = typer.Typer(help="Host audit and tuning for GPU servers (chapter 3).", no_args_is_help=True)


ProfileOpt = Annotated[Profile, typer.Option("--profile", help="training or inference")]
RootOpt = Annotated[Path, typer.Option("--root", help="root of the /proc and /sys tree (a fake tree in tests)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="schema-versioned JSON on stdout")]


@app.command(help="Read-only audit of the OS, driver and GPU settings; needs no root. " + EXIT_CODES_HELP)
def audit(profile: ProfileOpt = "training", root: RootOpt = Path("/"),
          data_path: Annotated[Path | None, typer.Option(help="dataset/checkpoint folder to check")] = None,
          json: JsonOpt = False,
          strict: Annotated[bool, typer.Option(help="UNKNOWN counts as FAIL")] = False,
          gpu: Annotated[bool, typer.Option(help="read GPUs through NVML")] = True,
          torch: Annotated[bool, typer.Option(help="probe PyTorch's effective CUDA allocator")] = True) -> None:
    raise typer.Exit(audit_main(AuditOptions(profile, root, data_path, json, strict, gpu, torch)))


@app.command(help="Plan the host knobs of a profile (changes nothing); --apply writes them as root, saving "
                  "the previous values first; --rollback STATE restores them. Exit 0 done, 1 refused or "
                  "not verified, 2 bad usage.")
def tune(profile: ProfileOpt = "training", root: RootOpt = Path("/"),
         apply: Annotated[bool, typer.Option(help="write the plan (root, writable target)")] = False,
         state: Annotated[Path | None, typer.Option(help="state file for the previous values")] = None,
         rollback: Annotated[Path | None, typer.Option(help="restore the values in this state file")] = None,
         json: JsonOpt = False) -> None:
    raise typer.Exit(tune_main(TuneOptions(profile, root, apply, state, rollback, json)))


@app.command(help="Validate Kubernetes GPU manifests offline (schema + GPU rules). Exit 1 when one is rejected.")
def manifest(paths: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False)]) -> None:
    raise typer.Exit(manifest_main(paths))
