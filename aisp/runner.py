"""The suite runner: each pair in its own subprocess, killed with its process group on timeout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from aisp import environment
from aisp.artifacts import atomic_write_json, best_variant, new_run_dir, write_pair, write_summary
from aisp.discovery import Pair
from aisp.options import RunOptions
from aisp.peak import load_peaks
from aisp.results import assemble, failed
from aisp.roofline import annotate

PACKAGE_PARENT = Path(__file__).resolve().parent.parent
DEFAULT_TIMEOUT_S = 300.0
KILL_GRACE_S = 5.0


class Reporter(Protocol):
    def start(self, pairs: list[Pair]) -> None: ...
    def pair_started(self, pair: Pair) -> None: ...
    def pair_done(self, result: dict[str, Any]) -> None: ...
    def finish(self, results: list[dict[str, Any]], run_dir: Path) -> None: ...


class SilentReporter:
    """A reporter that shows nothing (tests, library use)."""

    def start(self, pairs: list[Pair]) -> None: ...
    def pair_started(self, pair: Pair) -> None: ...
    def pair_done(self, result: dict[str, Any]) -> None: ...
    def finish(self, results: list[dict[str, Any]], run_dir: Path) -> None: ...


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _log_tail(log: Path, lines: int = 15) -> str:
    if not log.exists():
        return ""
    tail = log.read_text(errors="replace").splitlines()[-lines:]
    return "\n".join(tail)


@dataclass(frozen=True)
class Budget:
    """How long a worker may run: its workload's timeout_s (which the worker reports once it has
    loaded the pair; DEFAULT_TIMEOUT_S until then) times the multiplier, capped by the suite's
    deadline."""

    multiplier: float = 1.0
    deadline: float | None = None

    def limit(self, declared: float | None) -> float:
        limit = (declared or DEFAULT_TIMEOUT_S) * self.multiplier
        if self.deadline is not None:
            limit = min(limit, self.deadline - time.monotonic())
        return limit


def spawn(spec: dict[str, Any], work_dir: Path, budget: Budget, tag: str) -> tuple[dict | None, str, str]:
    """Run one worker; returns (result document or None, status, reason).

    status is "done" when the worker wrote its result, else "timeout" or "error".
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    spec_path, result_path, log_path = (work_dir / f"{tag}.spec.json", work_dir / f"{tag}.result.json",
                                        work_dir / f"{tag}.log")
    timeout_path = work_dir / f"{tag}.timeout"
    spec = {**spec, "result_path": str(result_path), "timeout_path": str(timeout_path)}
    spec_path.write_text(json.dumps(spec, indent=2))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if spec["options"].get("reproducible"):
        env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    started = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "aisp.worker", str(spec_path)], cwd=PACKAGE_PARENT,
                                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        while (code := proc.poll()) is None:
            declared = float(timeout_path.read_text()) if timeout_path.exists() else None
            limit = budget.limit(declared)
            if time.monotonic() - started > limit:
                _kill_group(proc)
                return None, "timeout", f"timed out after {limit:.0f} s; killed with its process group"
            time.sleep(0.05)
    if result_path.exists():
        return json.loads(result_path.read_text()), "done", ""
    how = f"killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"
    if code == -signal.SIGKILL:
        how += " (out of memory?)"
    tail = _log_tail(log_path)
    return None, "error", f"worker {how} without a result" + (f"; log tail:\n{tail}" if tail else "")


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def pair_info(pair: Pair) -> dict[str, Any]:
    return {"target": pair.target, "group": pair.group, "name": pair.name,
            "files": [str(p) for p in (pair.baseline, *pair.optimized)]}


def run_pair(pair: Pair, options: RunOptions, run_dir: Path, budget: Budget) -> dict[str, Any]:
    """Run one pair in a subprocess (several for --cold-start) and assemble its result."""
    info = pair_info(pair)
    work = run_dir / pair.slug
    spec = {"paths": info["files"], "options": options.to_dict(), "profile_dir": str(work / "profiles")}
    doc, status, reason = spawn(spec, work / "logs", budget, "pair")
    if doc is None:
        return failed(info, status, reason)
    if doc["status"] != "done":
        return failed(info, doc["status"], doc.get("reason") or "", doc.get("workload"))
    raw = doc["variants"]
    if options.cold_start and not options.verify_only:
        raw = _cold_samples(spec, raw, work, budget)
    result = _annotate(assemble(info, doc["workload"], raw), doc, work)
    if options.profile == "full":
        result = _nsight(result, work / "profiles")
    return result


def _nsight(result: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """--profile full: Nsight Compute on the best optimized variant's top kernels (from its torch
    trace), and Nsight Systems; each records its skip reason where the tool is absent. Runs after
    timing, in its own processes, so it never touches the timed samples."""
    best = best_variant(result)
    if best is None:
        return result
    from aisp.ncu import run_ncu, top_launches
    from aisp.nsight import run_nsys

    trace = ((result.get("profile") or {}).get("variants", {}).get(best["name"], {}).get("files", {}).get("trace"))
    launches = top_launches(Path(trace), 5) if trace and Path(trace).exists() else []
    nsight = {"ncu": run_ncu(Path(best["file"]), out_dir, launches=launches),
              "nsys": run_nsys(Path(best["file"]), out_dir), "variant": best["name"]}
    return {**result, "profile": {**(result.get("profile") or {}), "nsight": nsight}}


def _annotate(result: dict[str, Any], doc: dict[str, Any], work: Path) -> dict[str, Any]:
    """Add telemetry, throttle notes and profile summaries to an assembled result."""
    notes = []
    telemetry = doc.get("telemetry") or {}
    for var in [result["baseline"], *result["variants"]]:
        count = len(var.get("throttled_samples") or {})
        if count:
            reasons = sorted({r for rs in var["throttled_samples"].values() for r in rs})
            notes.append(f"{var['name']}: {count} of {len(var.get('samples_ms') or [])} samples taken while "
                         f"throttled ({', '.join(reasons)})")
    if telemetry.get("unavailable"):
        notes.append(telemetry["unavailable"])
    profile = work / "profiles" / "profile_summary.json"
    extra = {"profile": json.loads(profile.read_text())} if profile.exists() else {}
    return {**result, "telemetry": telemetry, "notes": notes, **extra}


def _cold_samples(spec: dict[str, Any], raw: list[dict[str, Any]], work: Path, budget: Budget) -> list[dict]:
    """Re-time each verified variant alone in a fresh process; keeps the verification records."""
    merged = []
    for i, record in enumerate(raw):
        if record["verdict"] not in ("pending", "ok"):
            merged.append(record)
            continue
        single = {**spec, "paths": [record["file"]], "single": True}
        doc, status, reason = spawn(single, work / "logs", budget, f"cold{i}")
        if doc is None or doc.get("status") != "done":
            merged.append({**record, "verdict": status if doc is None else doc["status"],
                           "reason": reason or (doc or {}).get("reason"), "samples_ms": []})
            continue
        timed = doc["variants"][0]
        merged.append({**record, "samples_ms": timed["samples_ms"], "host_samples_ms": timed["host_samples_ms"],
                       "memory": timed["memory"], "metrics": timed["metrics"]})
    return merged


BEYOND_CEILING_PCT = 105.0
"""A variant above this % of its roofline bound is flagged: its FLOP/byte accounting is wrong, or
it did not do the work (e.g. returned a copy of an answer computed in setup())."""


def add_roofline(result: dict[str, Any], peaks: dict[str, Any] | None) -> dict[str, Any]:
    """Annotate each timed variant with intensity, achieved rate and % of the roofline bound."""
    if not peaks or not result.get("baseline"):
        return result
    notes = list(result.get("notes", []))
    for var in [result["baseline"], *result["variants"]]:
        roof = annotate(var, result["workload"], peaks)
        if roof is None:
            continue
        var["roofline"] = roof
        if roof["pct_of_bound"] > BEYOND_CEILING_PCT:
            notes.append(f"{var['name']} runs at {roof['pct_of_bound']:.0f}% of the measured roofline bound: "
                         "check its FLOP/byte accounting, or whether it really does the work")
    return {**result, "notes": notes}


def run_suite(pairs: list[Pair], options: RunOptions, reporter: Reporter | None = None,
              judge: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None,
              ) -> tuple[list[dict[str, Any]], Path]:
    """Run every pair, write artifacts, and return the results and the run folder.

    ``judge(result, manifest)`` may amend each result (expectations add ``regressed``).
    """
    reporter = reporter or SilentReporter()
    run_dir = new_run_dir(options.artifacts_dir)
    manifest = environment.manifest(PACKAGE_PARENT, options.to_dict())
    atomic_write_json(run_dir / "manifest.json", manifest)
    deadline = time.monotonic() + options.suite_timeout if options.suite_timeout else None
    peaks = load_peaks(manifest["hardware_key"])
    results: list[dict[str, Any]] = []
    reporter.start(pairs)
    for pair in pairs:
        reporter.pair_started(pair)
        if deadline is not None and deadline <= time.monotonic():
            result = failed(pair_info(pair), "timeout", "suite timeout reached before this pair started")
        else:
            result = run_pair(pair, options, run_dir, Budget(options.timeout_multiplier, deadline))
        result = add_roofline(result, peaks)
        if judge is not None:
            result = judge(result, manifest)
        write_pair(run_dir, result)
        results.append(result)
        reporter.pair_done(result)
    write_summary(run_dir, results, {"run_id": run_dir.name, "hardware_key": manifest["hardware_key"],
                                     "options": options.to_dict()})
    reporter.finish(results, run_dir)
    return results, run_dir
