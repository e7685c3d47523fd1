"""A planted slowdown (issue 29's Show): is it flagged, and confirmed by the re-runs, in a whole-chapter run?

    PYTHONPATH=. python tests/planted_slowdown.py -t ch07:PAIR --percent 20 --out DIR [-- aisp bench run options]

Copies the pair's chapter folder (its expectation files with it) to DIR/<chapter>, makes each
optimized variant of the pair ``--percent`` slower, runs the whole copied chapter with
``AISP_ROOT=DIR aisp bench run -t <chapter>`` against the copied expectations, and prints the
planted pair's verdict and the chapter's exit code (3: a regression confirmed by ``--confirm-runs``).

How a variant is made slower: after its setup, its ``run()`` is timed (median of 20 calls, device
time on a GPU); from then on every ``run()`` is followed by a spin of ``percent`` of that time on
the same stream (``torch.cuda._sleep``; a busy loop on a CPU), inside the timed window, with the
output unchanged (verification still passes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

WRAPPER = '''

# --- planted by tests/planted_slowdown.py: {percent}% slower ---
from planted_spin import planted as _planted

get_benchmark = _planted(get_benchmark, {percent})
'''


def plant(folder: Path, name: str, percent: float) -> list[Path]:
    """Make each optimized variant of pair ``name`` in ``folder`` ``percent`` slower; returns the files changed."""
    files = sorted(folder.glob(f"optimized_{name}.py")) + sorted(folder.glob(f"optimized_{name}_*.py"))
    if not files:
        raise SystemExit(f"no optimized_{name}*.py in {folder}")
    shutil.copy(Path(__file__).with_name("planted_spin.py"), folder / "planted_spin.py")
    for path in files:
        path.write_text(path.read_text() + WRAPPER.format(percent=percent))
    return files


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-t", "--target", required=True, help="CHAPTER:PAIR")
    parser.add_argument("--percent", type=float, default=20.0)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("rest", nargs="*", help="more aisp bench run options (after --)")
    args = parser.parse_args(argv)
    chapter, _, name = args.target.partition(":")
    source = REPO / chapter
    if not name or not source.is_dir():
        raise SystemExit(f"-t must be CHAPTER:PAIR of this checkout, not {args.target}")
    copy = args.out / chapter
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__", "build"))
    changed = plant(copy, name, args.percent)
    print(f"planted {args.percent:g}% in {', '.join(p.name for p in changed)}", flush=True)
    env = {**os.environ, "AISP_ROOT": str(args.out),  # the copy is the only chapter the run sees
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-m", "aisp", "bench", "run", "-t", chapter,
                          "--artifacts-dir", str(args.out / "runs"), *args.rest], env=env, check=False)
    summaries = sorted((args.out / "runs").glob("*/summary.json"))
    results = json.loads(summaries[-1].read_text())["results"] if summaries else []
    planted = next((r for r in results if r["name"] == name), None)
    report = {"target": args.target, "percent": args.percent, "exit_code": run.returncode,
              "verdict": planted and planted["verdict"], "reason": planted and planted["reason"],
              "confirmation": planted and planted.get("confirmation"),
              "others": {r["name"]: r["verdict"] for r in results if r["name"] != name}}
    print(json.dumps(report, indent=2, default=str))
    (args.out / "planted_slowdown.json").write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
