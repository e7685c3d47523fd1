"""Continuing a run that was cut short (``aisp bench run --resume RUN_DIR``).

A run folder holds, from its start, ``manifest.json`` (the environment, the options, the selection
and one record per part of the run) and, as each pair ends, its result (written atomically). A
resumed part runs only the selected pairs without a final result there: never started, stopped by
the suite's time limit, or stopped by an interrupt. A pair that ended with a verdict of its own (ok,
slower, error, verify-failed, its own timeout, skipped...) is kept as it is: running failures again
until they pass would bias the run's verdict. The selection and every option that changes what a
pair measures must be the run's; so must the commit and the working tree's changes, unless forced
(the part records it). A folder in use by another run is refused (a lock held while a part runs).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import platform
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from aisp.harness.artifacts import atomic_write_json, pair_result_path, read_json
from aisp.harness.discovery import Pair
from aisp.harness.options import RunOptions

NOT_STARTED = "suite timeout reached before this pair started"
"""The reason of a pair the suite's time limit left unstarted (verdict ``timeout``)."""
SUITE_RAN_OUT = "the suite's time limit (--suite-timeout) ran out"
"""In the reason of a pair stopped midway by the suite's time limit (verdict ``timeout``)."""
INTERRUPTED = "stopped: the run was interrupted"
"""The reason of a pair stopped by Ctrl-C or SIGTERM (verdict ``error``)."""
FREE_OPTIONS = ("suite_timeout", "gpus", "fork_workers", "reuse_workers", "confirm_runs", "update_expectations",
                "artifacts_dir")
"""Options a resumed part may change: how long the part may take, on which GPUs and in which processes
its pairs run, how many re-runs confirm a regression, whether expectations are stored. The others
(iterations, warmup, timing, seed, device, flush-l2, profile, reproducible, cold start, timeout
multiplier, shard) change what a pair measures or which pairs run, and must be the run's."""
GIT_FIELDS = ("git_commit", "git_dirty", "git_diff_sha256")
LOCK = ".lock"


class ResumeError(ValueError):
    """A run folder this part cannot continue; the message (one line) says why."""


@dataclass(frozen=True)
class Part:
    """What this part of a run is: a new run's selection, or the run folder it resumes."""

    targets: tuple[str, ...] = ()
    """The targets asked for (``-t``), recorded so that a resumed part selects the same pairs."""
    roots: tuple[str, ...] = ()
    """The ``--root`` folders, as absolute paths."""
    resume: Path | None = None
    """The run folder this part continues; None: a new run."""
    forced: bool = False
    """--force-resume: continue a run recorded at another commit or working tree (recorded)."""


def unfinished(result: dict[str, Any]) -> bool:
    """Whether a stored result is no verdict of the pair's own: the suite's time limit or an interrupt
    stopped it, or it never started."""
    reason, verdict = result.get("reason") or "", result.get("verdict")
    return (verdict == "timeout" and (reason == NOT_STARTED or SUITE_RAN_OUT in reason)) or \
        (verdict == "error" and reason.startswith(INTERRUPTED))


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The run folder's manifest, with the selection a resumed part needs; raises ResumeError."""
    try:
        manifest = read_json(run_dir / "manifest.json")
    except (FileNotFoundError, ValueError) as exc:
        raise ResumeError(f"{run_dir} is not a run folder: {exc}") from exc
    if "selection" not in manifest:
        raise ResumeError(f"{run_dir} was recorded by an aisp without --resume (its manifest names no selection)")
    return manifest


def options_for(manifest: dict[str, Any], given: dict[str, Any]) -> RunOptions:
    """The resumed part's options: the run's own, with the free options given on the command line;
    raises ResumeError for any other option given with another value than the run's."""
    try:
        stored = RunOptions.from_dict(manifest.get("config") or {})
    except (TypeError, ValueError) as exc:
        raise ResumeError(f"the run's options cannot be read by this aisp: {exc}") from exc
    known = {f.name for f in fields(RunOptions)}
    for name, value in given.items():
        if name in known and name not in FREE_OPTIONS and getattr(stored, name) != value:
            raise ResumeError(f"--{name.replace('_', '-')} {value} differs from the run's {getattr(stored, name)}: "
                              f"a resumed run measures as it began (only {', '.join(free_flags())} may change)")
    return replace(stored, **{k: v for k, v in given.items() if k in FREE_OPTIONS})


def free_flags() -> list[str]:
    return [f"--{name.replace('_', '-')}" for name in FREE_OPTIONS if name != "artifacts_dir"]


def finished_results(run_dir: Path, pairs: list[Pair]) -> dict[str, dict[str, Any]]:
    """The final results stored in ``run_dir`` of these pairs, by slug (an unfinished one left out)."""
    found = {}
    for pair in pairs:
        path = pair_result_path(run_dir, pair.slug)
        if path.exists():
            try:
                result = read_json(path)
            except ValueError as exc:
                raise ResumeError(str(exc)) from exc
            if not unfinished(result):
                found[pair.slug] = result
    return found


def _check(manifest: dict[str, Any], here: dict[str, Any], pairs: list[Pair], forced: bool) -> None:
    """Raise ResumeError where this part cannot join the run: other pairs, other hardware, or (unless
    forced) another commit or working tree."""
    stored, now = manifest["selection"].get("pairs", []), [p.target for p in pairs]
    if stored != now:
        extra, missing = [t for t in now if t not in stored], [t for t in stored if t not in now]
        said = [f"{len(names)} {what} ({', '.join(names[:3])}{', ...' * (len(names) > 3)})"
                for names, what in ((extra, "pairs not in it"), (missing, "of its pairs not selected")) if names]
        raise ResumeError(f"the selection differs from the run's: {'; '.join(said) or 'another order'}")
    if manifest.get("hardware_key") != here.get("hardware_key"):
        raise ResumeError(f"the run ran on {manifest.get('hardware_key')}, this machine is {here.get('hardware_key')}: "
                          "not one run")
    if not forced and any(manifest.get(k) != here.get(k) for k in GIT_FIELDS):
        raise ResumeError(f"the run was recorded at {_code(manifest)}, this checkout is {_code(here)}: its pairs "
                          "would measure two versions of the code; --force-resume continues anyway (recorded)")


def _code(env: dict[str, Any]) -> str:
    commit = (env.get("git_commit") or "no commit")[:12]
    if not env.get("git_dirty"):
        return f"{commit} (clean)"
    return f"{commit} (dirty, changes {(env.get('git_diff_sha256') or '')[:12]})"


def _move_stopped(run_dir: Path, pairs: list[Pair], earlier: dict[str, Any], part: int) -> None:
    """Move each unfinished pair's folder (its stopped attempt's logs) to ``stopped/before_part<N>/``,
    so that the pair runs again into a clean folder and nothing of the attempt is lost."""
    for pair in pairs:
        if pair.slug not in earlier and (run_dir / pair.slug).exists():
            (into := run_dir / "stopped" / f"before_part{part}").mkdir(parents=True, exist_ok=True)
            os.replace(run_dir / pair.slug, into / pair.slug)


class PartLog:
    """This part's record in the run's manifest, written when the part starts and again as each pair
    ends (a part killed midway keeps its time up to its last pair) and when it ends."""

    def __init__(self, run_dir: Path, manifest: dict[str, Any], record: dict[str, Any]) -> None:
        self.run_dir, self.manifest, self.record = run_dir, manifest, record
        self._started = time.monotonic()
        self.write()

    @classmethod
    def begin(cls, run_dir: Path, here: dict[str, Any], pairs: list[Pair], part: Part
              ) -> tuple[PartLog, dict[str, dict[str, Any]]]:
        """Record this part (checking that it may join the run) and return its log with the run's
        finished results (none for a new run); raises ResumeError."""
        record = {"part": 1, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "ended": None, "wall_s": None,
                  "complete": False, **{k: here.get(k) for k in GIT_FIELDS}, "hostname": platform.node(),
                  "command_line": sys.argv, "gpus": (here.get("config") or {}).get("gpus"),
                  "suite_timeout": (here.get("config") or {}).get("suite_timeout")}
        if part.resume is None:
            record["pairs_to_run"] = len(pairs)
            selection = {"targets": list(part.targets), "roots": list(part.roots), "pairs": [p.target for p in pairs]}
            return cls(run_dir, {**here, "selection": selection, "parts": [record]}, record), {}
        manifest = read_manifest(run_dir)
        _check(manifest, here, pairs, part.forced)
        earlier = finished_results(run_dir, pairs)
        parts = manifest.get("parts") or []
        record.update(part=len(parts) + 1, resumed=True, forced=part.forced, finished_before=len(earlier),
                      pairs_to_run=len(pairs) - len(earlier))
        _move_stopped(run_dir, pairs, earlier, record["part"])
        return cls(run_dir, {**manifest, "parts": [*parts, record]}, record), earlier

    def write(self, complete: bool = False) -> None:
        """The manifest with this part's end so far (``complete``: the part ran to its end)."""
        self.record.update(ended=time.strftime("%Y-%m-%dT%H:%M:%S%z"), complete=complete,
                           wall_s=round(time.monotonic() - self._started, 1))
        atomic_write_json(self.run_dir / "manifest.json", self.manifest)

    @property
    def parts(self) -> list[dict[str, Any]]:
        return self.manifest["parts"]


@contextlib.contextmanager
def holding(run_dir: Path) -> Iterator[None]:
    """Hold the run folder's lock while a part runs (released however the process ends); raises
    ResumeError when another process holds it."""
    fd = os.open(run_dir / LOCK, os.O_CREAT | os.O_RDWR, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise ResumeError(f"{run_dir} is in use by another aisp run") from exc
        yield
    finally:
        os.close(fd)
