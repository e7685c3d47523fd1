"""A check in its own process: ``python -m aisp.check.worker SPEC.json``, started by the harness's
``spawn`` (its timeout, then its process-group kill), so code sent as text (the MCP server's
``check_kernel``) never runs in the process that received it.

The spec names the kernel and the reference (``MODULE:FUNCTION`` or ``FILE.py:FUNCTION``), the
shapes, dims and dtypes, the ``CheckOptions`` fields and ``timeout_s``; the worker reports the
timeout first, then writes ``{"result": ...}`` or ``{"usage": ...}`` to ``result_path`` atomically.
If it dies or hangs, no result appears and the caller gets spawn's reason."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from aisp.check.core import CheckOptions, check_named
from aisp.check.inputs import Usage
from aisp.harness.artifacts import atomic_write_text


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    atomic_write_text(Path(spec["timeout_path"]), str(spec["timeout_s"]))
    try:
        result = check_named(spec["kernel"], spec["reference"], spec["shapes"], spec["dims"], spec["dtypes"],
                             CheckOptions(**spec["check"]))
        doc = {"result": result.to_dict()}
    except Usage as exc:
        doc = {"usage": str(exc)}
    atomic_write_text(Path(spec["result_path"]), json.dumps(doc))


if __name__ == "__main__":
    main(sys.argv[1])
