"""Several Triton-interpreter scripts in one fresh interpreter (``TRITON_INTERPRET=1``, after
``triton_cpu.INTERPRETER_FIX``): torch and Triton are imported once for all of them, seconds of CPU a
start, and each script still passes or fails alone (its own outcome, its own test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from triton_cpu import INTERPRETER_FIX, ROOT

RUNNER = """
import contextlib, io, json, sys, traceback
outcomes = {}
for name, source in json.loads(sys.argv[1]).items():
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(source, name, "exec"), {"__name__": name})
        outcomes[name] = printed.getvalue().strip()
    except BaseException:
        outcomes[name] = traceback.format_exc()[-3000:]
print(json.dumps(outcomes))
"""


def run_interpreted_parts(parts: dict[str, str], timeout: int = 900) -> dict[str, str]:
    """Run each of ``parts`` (name: Python source) in turn in one interpreted process from the
    repository root; what each printed (``interpreted ok`` where it passed) or its traceback, by name."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", INTERPRETER_FIX + RUNNER, json.dumps(parts)], capture_output=True,
                          text=True, env=env, timeout=timeout, check=False, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])
