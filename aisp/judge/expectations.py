"""Expectations per hardware key: ``<pair folder>/expectations_<key>.json``.

The key is that of the GPUs a pair uses: its world size (``Requirements.gpus``/``ranks``) of this
host's GPU model, so a one-GPU pair on a 2 x H200 host is judged against ``expectations_h200.json``
and a two-rank pair against ``expectations_2x_h200.json``; ``cpu`` without a GPU. A pair of several
GPUs on a host with more GPUs than it uses gets a file of its own, ``expectations_2x_h200_host4.json``
(2 of a 4 x H200 host): such a host moves its figures (ch04:gradient_bucketing_multigpu 1.65x on 2
GPUs of a 4-GPU host, 4.22x on a 2-GPU host), and leases of either size come and go, so each size
keeps its own runs instead of one replacing the other's.

Each entry holds the latest measured figures, its own environment fingerprint
(:func:`aisp.harness.environment.fingerprint`: GPU model and the pair's GPU count, driver, CUDA,
torch, Triton, Python, CPU model; the host's GPU count and NVLinks for a multi-GPU pair),
provenance (the commit that ran, dirty flag, diff hash), the host's speed (``host_dispatch_us``: the op
dispatch cost the worker read, by which host figures are judged, :data:`regression.HOST_SPEED_REL`), the
A/A ``noise`` of ``aisp bench noise``, and
a ``history`` of up to ten runs: ``--update-expectations`` appends a run while the figures stay
within their run-to-run limits in the same environment, and starts a new history when the level
changed (another environment, a shift its re-runs confirmed, or a shift seen in two runs in a row);
a single unconfirmed shift is held as the entry's ``pending`` run until the next run decides. A run is judged against the history (:mod:`aisp.judge.regression`);
an entry measured in another environment gives ``not-compared`` (environment changed), never a
regression, and so does a result measured on a busy host (which is not stored either). Files
written before entries carried their own environment are migrated on read.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from aisp.harness.artifacts import atomic_write_json, best_variant, read_json
from aisp.harness.artifacts import world_size as workload_world_size
from aisp.harness.environment import fingerprint, fingerprint_changes, hardware_key
from aisp.judge.regression import (
    MEASURED,
    comparable,
    dispatch_us,
    history_run,
    judge_entry,
    level_change,
    refusal,
)
from aisp.judge.run_noise import HISTORY_LENGTH


class Unreadable(ValueError):
    """An expectations file that is not valid JSON or not in the expected shape; names the file."""


def world_size(result: dict[str, Any]) -> int:
    """Ranks (one GPU each on CUDA) the pair runs as, from its workload's requirements."""
    return workload_world_size(result.get("workload") or {})


def gpu_key(result: dict[str, Any], env: dict[str, Any]) -> str:
    """The hardware key of the GPUs this pair uses on this host (``cpu`` without a GPU): the key of
    their measured peaks."""
    if not env.get("gpu_name"):
        return env["hardware_key"]
    return hardware_key(env["gpu_name"], world_size(result))


def key_for(result: dict[str, Any], env: dict[str, Any]) -> str:
    """The key of the pair's expectation file: :func:`gpu_key`, and for a pair of several GPUs on a
    host with more, the host's GPU count (``2x_h200_host4``)."""
    key, gpus, host = gpu_key(result, env), world_size(result), env.get("gpu_count") or 0
    return f"{key}_host{host}" if env.get("gpu_name") and 1 < gpus < host else key


def pair_fingerprint(result: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """The run's fingerprint with the GPU count the pair uses, not the host's (and, for a pair of
    several GPUs, the host's count and NVLinks)."""
    return fingerprint(env, world_size(result))


def path_for(result: dict[str, Any], key: str) -> Path:
    """The expectations file of the folder a pair lives in."""
    return Path(result["files"][0]).parent / f"expectations_{key}.json"


def _migrated(entry: dict[str, Any], file_env: dict[str, Any] | None) -> dict[str, Any]:
    """An entry of an older file: the file's environment and a history of its one stored run."""
    entry = dict(entry)
    if file_env and "environment" not in entry:
        entry["environment"] = file_env
    if "history" not in entry and entry.get("speedup"):
        entry["history"] = [history_run(entry)]
    return entry


def load(path: Path) -> dict[str, Any]:
    """A file's contents with every entry in the current format; an empty document when the file
    does not exist. Raises :class:`Unreadable` naming the file when it cannot be read."""
    if not path.exists():
        return {"entries": {}}
    try:
        doc = read_json(path)
    except ValueError as exc:
        raise Unreadable(str(exc)) from exc
    entries = doc.get("entries")
    if not isinstance(entries, dict) or not all(isinstance(e, dict) for e in entries.values()):
        raise Unreadable(f"{path}: no 'entries' object of pair entries")
    file_env = doc.get("environment")
    return {"hardware_key": doc.get("hardware_key"),
            "entries": {name: _migrated(e, file_env) for name, e in entries.items()}}


def _save(path: Path, key: str, entries: dict[str, Any]) -> None:
    atomic_write_json(path, {"hardware_key": key, "entries": dict(sorted(entries.items()))})


def judge(result: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """Amend a result with its comparison; a regression turns its verdict into ``regressed``. A
    result not compared for its environment or re-runs that failed, and one whose flag the re-runs
    did or did not confirm, gets a note saying so (the console prints notes; the runner has noted
    a busy host already).

    A file that cannot be read gives the status ``unreadable`` (see :func:`unreadable_files`)."""
    key = key_for(result, env)
    path = path_for(result, key)
    try:
        entry = load(path)["entries"].get(result["name"])
    except Unreadable as exc:
        outcome = {"status": "unreadable", "detail": str(exc)}
    else:
        outcome = judge_entry(result, entry, pair_fingerprint(result, env))
    amended = {**result, "expectation": {**outcome, "file": str(path), "hardware_key": key}}
    if outcome["status"] == "not-compared" and outcome.get("why") not in ("not judged", "host busy") \
            or outcome.get("confirmation"):
        amended["notes"] = [*result.get("notes", []), _note(outcome)]
    if outcome["status"] == "regressed":
        amended["verdict"] = "regressed"
        amended["reason"] = "; ".join(filter(None, [result.get("reason"), f"regressed: {outcome['detail']}"]))
    return amended


def _note(outcome: dict[str, Any]) -> str:
    """What the console and reports show of a comparison they would not otherwise explain."""
    return f"not compared: {outcome['detail']}" if outcome["status"] == "not-compared" else \
        f"expectations: {outcome['detail']}"


def unreadable_files(results: list[dict[str, Any]]) -> list[str]:
    """One line per expectations file the run could not read: ``<file>: <why>``."""
    lines = {(r.get("expectation") or {}).get("detail") for r in results
             if (r.get("expectation") or {}).get("status") == "unreadable"}
    return sorted(line for line in lines if line)


def stored_times(result: dict[str, Any], env: dict[str, Any]) -> dict[str, list[float]]:
    """Each variant's stored medians (one per run of the history) for this pair, by variant name;
    empty where there is no entry or it was measured in another environment."""
    entry = load(path_for(result, key_for(result, env)))["entries"].get(result["name"])
    if not entry or fingerprint_changes(entry.get("environment") or {}, pair_fingerprint(result, env)):
        return {}
    history = entry.get("history", [])
    times = {result["baseline"]["name"]: [h["baseline_ms"] for h in history if h.get("baseline_ms")]} \
        if result.get("baseline") else {}
    for run in history:
        if run.get("best") and run.get("optimized_ms"):
            times.setdefault(run["best"], []).append(run["optimized_ms"])
    return times


def entry_from(result: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """What a measured result stores: times, speedup with interval, best variant, memory,
    throughput, the workload's link, environment and provenance (the history is added by
    :func:`update`). ``env`` is the run's manifest, written when the run started: the commit is the
    one that ran, and a tree with changes to anything but expectation files is recorded as dirty with
    the diff's SHA-256."""
    base, best = result["baseline"], best_variant(result) or {}
    return {
        "baseline_ms": base["summary"]["median"],
        "optimized_ms": best["summary"]["median"] if best.get("summary") else None,
        "baseline_cv": base["summary"]["cv"],
        "optimized_cv": best["summary"]["cv"] if best.get("summary") else None,
        "speedup": result["speedup"],
        "headline": result["workload"].get("headline", "time"),
        "best": result["best"],
        "seconds": (result.get("phases") or {}).get("total"),  # the pair's wall time: --gpus and --shard plan with it
        "memory": {"baseline_peak_bytes": (base.get("memory") or {}).get("peak_bytes"),
                   "optimized_peak_bytes": (best.get("memory") or {}).get("peak_bytes"),
                   "peak_method": (base.get("memory") or {}).get("peak_method"),
                   # held outside torch's allocator beyond the baseline's, charged in the memory ratio
                   **({"optimized_outside_bytes": best["outside_excess_bytes"]}
                      if best.get("outside_excess_bytes") else {})},
        "throughput": best.get("throughput", {}),
        "link": _link(result),  # --gpus runs no two pairs over a host link at once (aisp.harness.scheduler)
        "host_dispatch_us": dispatch_us(result),  # the host's speed: host figures are judged at a similar one
        "environment": pair_fingerprint(result, env),
        "provenance": {"date": time.strftime("%Y-%m-%dT%H:%M:%S"), "commit": env.get("git_commit"),
                       "dirty": env.get("git_dirty"), "diff_sha256": env.get("git_diff_sha256"),
                       "run": env.get("run_id")},
    }


def stored_entry(result: dict[str, Any], old: dict[str, Any] | None, env: dict[str, Any]) -> dict[str, Any]:
    """The entry after storing ``result``. Its history grows while the level holds, and restarts
    where the level changed (first run, another environment, a shift its re-runs confirmed).

    A run that left the level with nothing to confirm it (an improvement, or a flag stored without
    re-runs) is held as the entry's ``pending`` run; the entry's figures and history stay. The next
    run decides: back at the stored level, it is appended and the pending run dropped (an outlier:
    ch15:chunked_prefill's p99 gap read 6.99x once against 3.1-3.6x in six runs on an H200, and
    storing it had discarded those six); at the pending run's level, the two start a new history
    (a change of level seen twice); anywhere else, it becomes the pending run."""
    new = entry_from(result, env)
    noise = {"noise": old["noise"]} if old and old.get("noise") else {}
    run = history_run(new)
    change = level_change(result, old, new["environment"])
    if change == "kept":
        return {**new, "history": [*old["history"], run][-HISTORY_LENGTH:], **noise}
    if change == "changed":
        return {**new, "history": [run], **noise}
    pending = old.get("pending")
    if pending and level_change(result, {**old, "history": [pending], "best": pending.get("best")},
                                new["environment"]) == "kept":
        return {**new, "history": [pending, run], **noise}
    return {**old, "link": new["link"], "pending": run}


def _link(result: dict[str, Any]) -> str | None:
    """The link the pair's bytes cross (``Workload.link``); None for a result that does not say."""
    return (result.get("workload") or {}).get("link")


def pending_runs(results: list[dict[str, Any]], env: dict[str, Any]) -> list[str]:
    """One line per stored result that is held as its entry's pending run (call after :func:`update`)."""
    lines = []
    for path, stored in _by_file(results, env).items():
        try:
            entries = load(path)["entries"]
        except Unreadable:
            continue
        for result in stored:
            if ((entries.get(result["name"]) or {}).get("pending") or {}).get("run") == env.get("run_id"):
                lines.append(f"{result['target']}: held as pending: its figures left the stored level; the history "
                             "keeps its runs until a second run confirms the new level")
    return lines


def _by_file(results: list[dict[str, Any]], env: dict[str, Any]) -> dict[Path, list[dict[str, Any]]]:
    """The results that may be stored (measured, comparable, with a baseline), by expectation file."""
    by_file: dict[Path, list[dict[str, Any]]] = {}
    for result in results:
        if comparable(result) and result.get("baseline"):
            by_file.setdefault(path_for(result, key_for(result, env)), []).append(result)
    return by_file


def refused(results: list[dict[str, Any]]) -> list[str]:
    """One line per measured pair that ``--update-expectations`` does not store, saying why."""
    return [f"{r['target']}: not stored in expectations: {refusal(r)}" for r in results
            if r["verdict"] in MEASURED and r.get("speedup") and refusal(r)]


def update(results: list[dict[str, Any]], env: dict[str, Any]) -> list[Path]:
    """Store this run's measured pairs; entries not re-measured are kept. Returns files written.
    A pair :func:`refused` names is not stored, nor a run (``env["run_id"]``, its folder's name) an entry's history already holds;
    an entry that holds the run already takes only its ``link`` (entries stored before they named one).

    A file that cannot be read is left as it is (``judge`` has named it in its pairs' results)."""
    written = []
    for path, measured in _by_file(results, env).items():
        try:
            entries = dict(load(path)["entries"])
        except Unreadable:
            continue
        changed = False
        for result in measured:
            old = entries.get(result["name"])
            if not _stored_already(old, env.get("run_id")):
                entries[result["name"]] = stored_entry(result, old, env)
            elif old.get("link") != _link(result):
                entries[result["name"]] = {**old, "link": _link(result)}
            else:
                continue
            changed = True
        if not changed:
            continue
        _save(path, key_for(measured[0], env), entries)
        written.append(path)
    return sorted(written)


def _stored_already(entry: dict[str, Any] | None, run_id: str | None) -> bool:
    """Whether this run (its folder's name) is already in the entry's history or its pending run:
    stored twice, one run would count as two toward the runs an entry needs (or confirm itself)."""
    runs = [*(entry or {}).get("history", []), (entry or {}).get("pending") or {}]
    return bool(run_id) and any(h.get("run") == run_id for h in runs)


def store_noise(path: Path, name: str, noise: dict[str, Any], key: str) -> None:
    """Record a pair's A/A noise (within one run), keeping everything else in the file."""
    entries = dict(load(path)["entries"])
    entries[name] = {**entries.get(name, {}), "noise": noise}
    _save(path, key, entries)


def below_bar(root: Path, key: str, min_speedup: float) -> list[dict[str, Any]]:
    """Entries of every ``expectations_<key>.json`` under ``root`` whose speedup is under the bar."""
    rows = []
    for path in sorted(root.glob(f"*/expectations_{key}.json")):
        for name, entry in load(path)["entries"].items():
            speedup = (entry.get("speedup") or {}).get("value")
            if speedup is not None and speedup < min_speedup:
                rows.append({"target": f"{path.parent.name}:{name}", "speedup": speedup,
                             "best": entry.get("best"), "headline": entry.get("headline", "time"),
                             "file": str(path)})
    return rows
