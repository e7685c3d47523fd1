"""``aisp profile run --tool nsys|ncu|torch|py-spy -- python my_script.py``: profile any command, not a pair.

ncu and nsys wrap the command as given. torch.profiler runs inside the profiled process, so the
torch tool takes a Python script or module (``python my_script.py …`` or ``python -m pkg …``) and
runs it through :mod:`aisp.profile.script`, which writes the Chrome trace.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from aisp.harness.artifacts import atomic_write_json, new_run_dir
from aisp.profile.host import record_command
from aisp.profile.ncu import run_ncu_command
from aisp.profile.nsight import failure, run_logged, run_nsys_command

TORCH_USAGE = "--tool torch profiles a Python program: -- python my_script.py [args] (or python -m module)"
MEMORY_USAGE = "--tool memory profiles the variants of a pair (-t ch13:memory_profiling), not a command"


class CommandError(ValueError):
    """The command cannot be profiled with this tool; the message says why."""


def command_name(command: list[str]) -> str:
    """A file-name stem for the command: its script's or module's name, else its program's."""
    if is_python(command[0]) and len(command) > 2 and command[1] == "-m":
        stem = command[2]
    else:
        words = [w for w in command[1:] if not w.startswith("-")] if is_python(command[0]) else []
        stem = Path(words[0]).stem if words else Path(command[0]).name
    return re.sub(r"[^A-Za-z0-9_.-]", "_", stem) or "command"


def is_python(program: str) -> bool:
    return re.fullmatch(r"python[0-9.]*", Path(program).name) is not None


def torch_wrapped(command: list[str], trace: Path) -> list[str]:
    """The command run under torch.profiler by :mod:`aisp.profile.script`."""
    if len(command) < 2 or not is_python(command[0]):
        raise CommandError(TORCH_USAGE)
    return [command[0], "-m", "aisp.profile.script", "--trace", str(trace), "--", *command[1:]]


def run_torch_command(command: list[str], base: Path, timeout_s: float) -> dict[str, Any]:
    """Run the Python ``command`` under torch.profiler; ``{"trace", "log"}`` or the failure."""
    trace, log = base.with_suffix(".trace.json"), base.with_suffix(".torch.log")
    package_root = str(Path(__file__).resolve().parents[2])  # this aisp, importable by the command's python
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    rc = run_logged(torch_wrapped(command, trace), log, timeout_s, {**os.environ, "PYTHONPATH": path})
    if rc != 0 or not trace.exists():
        return failure("the torch-profiled command", rc, log, timeout_s)
    return {"trace": str(trace), "log": str(log)}


def profile_any(command: list[str], tool: str, output_dir: Path | None, kernels: int = 5,
                timeout_s: float = 240.0) -> dict[str, Any]:
    """Profile ``command`` with ``tool``; writes ``profile_<tool>.json`` and returns what it holds
    (the same shape as a pair's: one entry under ``variants``, named after the command).
    Raises :class:`CommandError` for a command the tool cannot take (any, for ``memory``)."""
    if tool == "memory":
        raise CommandError(MEMORY_USAGE)
    if tool == "torch":
        torch_wrapped(command, Path("check.json"))  # reject a non-Python command before any folder is made
    out_dir = output_dir or new_run_dir(Path("artifacts")) / "command" / "profiles"
    out_dir.mkdir(parents=True, exist_ok=True)
    name = command_name(command)
    base = out_dir / name
    if tool == "ncu":
        found = run_ncu_command(command, base, kernels, timeout_s)
    elif tool == "nsys":
        found = run_nsys_command(command, base, timeout_s)
    elif tool == "py-spy":
        found = record_command(command, base, timeout_s)
    else:
        found = run_torch_command(command, base, timeout_s)
    result = {"target": " ".join(command), "tool": tool, "output_dir": str(out_dir), "variants": {name: found}}
    atomic_write_json(out_dir / f"profile_{tool}.json", result)
    return result
