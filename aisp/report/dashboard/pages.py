"""The dashboard's pages: the overview, one page per chapter, one per pair."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from aisp.report.dashboard.charts import plottable, samples_figure, speedup_figure, trend_figure
from aisp.report.dashboard.collect import Collection, PairRun, Run, expectation_entry, latest_by_key
from aisp.report.dashboard.html import Page, esc, link, rel, table, verdict_badge
from aisp.report.dashboard.roofline_chart import roofline_figure

RUN_FILES = ("summary.json", "manifest.json", "summary.md", "results.csv")
ENV_SKIP = ("command_line", "config", "schema_version")
MAX_LISTED_FILES = 40


def pair_page_name(target: str) -> str:
    return "pair-" + target.replace(":", "_") + ".html"


def chapter_page_name(chapter: str) -> str:
    return f"{chapter}.html"


def _speedup_text(ratio: dict[str, Any] | None) -> str:
    return f"{ratio['value']:.3g}x [{ratio['low']:.3g}, {ratio['high']:.3g}]" if ratio else "-"


def _num(value: Any, fmt: str = ".4g") -> str:
    return format(value, fmt) if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def _counts(results: list[dict[str, Any]]) -> str:
    counts = Counter(str(r.get("verdict")) for r in results)
    return " ".join(f"{verdict_badge(v)}&nbsp;{n}" for v, n in sorted(counts.items()))


def _run_links(run: Run, site: Path) -> str:
    return " ".join(link(rel(run.folder / name, site), name) for name in RUN_FILES if (run.folder / name).exists())


def _latest(collection: Collection, targets: list[str]) -> list[PairRun]:
    return [e for t in targets for _, e in sorted(latest_by_key(collection.pairs[t]).items())]


def _not_drawn(entries: list[PairRun]) -> str:
    """The pairs a speedup chart leaves out (their newest result has no speedup: a timeout, an error, a
    skip), each with its verdict, reason and run; "" when it draws them all."""
    missing = [e for e in entries if not plottable(e.result.get("speedup"))]
    if not missing:
        return ""
    items = "".join(f"<li>{esc(e.result['target'])} ({esc(e.key)}): {esc(str(e.result.get('verdict')))}"
                    f"{': ' + esc(e.result['reason']) if e.result.get('reason') else ''} (run {esc(e.run.run_id)})</li>"
                    for e in missing)
    return (f'<details class="note"><summary>not drawn: {len(missing)} {"pair" if len(missing) == 1 else "pairs"} '
            f"whose newest result has no speedup</summary><ul>{items}</ul></details>")


def _versions(run: Run) -> str:
    """torch, CUDA and driver of a run, where its manifest names them."""
    env = run.manifest
    parts = [f"{name} {env[key]}" for name, key in (("torch", "torch"), ("CUDA", "cuda"), ("driver", "driver"))
             if env.get(key)]
    return ", ".join(parts) or "-"


def overview(collection: Collection, site: Path) -> Page:
    """Every pair's latest speedup per hardware key, the chapters, the runs."""
    page = Page("aisp dashboard")
    runs = collection.runs
    keys = sorted({e.key for history in collection.pairs.values() for e in history})
    page.add(f"<p>{len(runs)} runs from {esc(runs[0].date if runs else '-')} to {esc(runs[-1].date if runs else '-')}, "
             f"{len(collection.pairs)} pairs, hardware keys: {esc(', '.join(keys) or '-')}. "
             f"All results as one tidy table: {link('data/results.csv', 'results.csv')}.</p>",
             "<h2>Latest speedup of each pair</h2>",
             '<p class="note">Newest result per pair and hardware key (a verify-only run does not replace a '
             "timed one); bars are 95% intervals; the dotted line is 1x (no change). Colours are verdicts "
             "(legend above the chart); pairs whose newest result has no speedup are listed below it.</p>")
    latest_all = _latest(collection, sorted(collection.pairs))
    page.figure(speedup_figure(latest_all), "No pair has a measured speedup yet.")
    page.add(_not_drawn(latest_all))
    rows = [[link(chapter_page_name(ch), ch), str(len(targets)),
             _counts([e.result for e in _latest(collection, targets)])]
            for ch, targets in collection.chapters().items()]
    page.add("<h2>Chapters</h2>", table(["chapter", "pairs", "latest verdicts"], rows, numeric=[1]))
    run_rows = [[esc(r.run_id), esc(r.date), esc(r.commit), esc(r.gpu), esc(r.hardware_key), esc(_versions(r)),
                 str(len(r.results)) + (" (verify only)" if r.verify_only else ""), _counts(r.results),
                 _run_links(r, site)] for r in reversed(runs)]
    page.add("<h2>Runs</h2>", table(["run", "date", "commit", "GPU", "key", "versions", "pairs", "verdicts", "files"],
                                    run_rows, numeric=[6]))
    if collection.skipped:
        items = "".join(f"<li>{esc(p.name)}: {esc(why)}</li>" for p, why in collection.skipped)
        page.add(f"<h2>Folders not read</h2><ul>{items}</ul>")
    return page


def chapter(collection: Collection, name: str, targets: list[str]) -> Page:
    """A chapter's latest speedups, its roofline per hardware key, its pairs."""
    page = Page(f"aisp {name}")
    latest = _latest(collection, targets)
    page.add("<h2>Speedup</h2>")
    page.figure(speedup_figure(latest), "No pair of this chapter has a measured speedup yet.")
    page.add(_not_drawn(latest))
    for key in sorted({e.key for e in latest}):
        page.add(f"<h2>Roofline ({esc(key)})</h2>")
        figure, left_out = roofline_figure([e for e in latest if e.key == key])
        page.figure(figure, "No pair of this chapter can be placed on a roofline for this key.")
        if left_out:
            page.add(f'<details class="note"><summary>not plotted: {len(left_out)} {"pair" if len(left_out) == 1 else "pairs"}</summary><ul>'
                     + "".join(f"<li>{esc(why)}</li>" for why in left_out) + "</ul></details>")
    rows = [[link(pair_page_name(e.result["target"]), e.result["target"]), esc(e.key),
             esc(_speedup_text(e.result.get("speedup"))), verdict_badge(e.result.get("verdict")),
             esc(e.result.get("reason") or ""), str(len(collection.pairs[e.result["target"]]))] for e in latest]
    page.add("<h2>Pairs</h2>", table(["pair", "key", "speedup [95% CI]", "verdict", "reason", "runs"], rows,
                                     numeric=[5]))
    return page


def _variant_rows(result: dict[str, Any]) -> list[list[str]]:
    rows = []
    for var in [v for v in [result.get("baseline"), *result.get("variants", [])] if v]:
        s, roof = var.get("summary") or {}, var.get("roofline") or {}
        rates = var.get("throughput") or {}
        rows.append([esc(var["name"]) + (" (best)" if var["name"] == result.get("best") else ""),
                     _num(s.get("median")), f"{_num(s['p10'])} - {_num(s['p90'])}" if s.get("p10") else "-",
                     _num(s.get("cv"), ".3f"),
                     _num(s.get("n"), "d") if isinstance(s.get("n"), int) else "-",
                     esc(_speedup_text(var.get("speedup"))), verdict_badge(var.get("verdict")),
                     _num(rates.get("tflops"), ".3g"), _num(rates.get("gbps"), ".3g"),
                     _num((var.get("memory") or {}).get("peak_bytes"), ".3g"), _num(roof.get("pct_of_bound"), ".0f"),
                     str(len(var.get("throttled_samples") or {})), esc(var.get("reason") or "")])
    return rows


def _notes(entry: PairRun) -> list[str]:
    """Throttle, telemetry, host and expectation notes of one result, and its run's environment."""
    result, notes = entry.result, [esc(n) for n in entry.result.get("notes") or []]
    telemetry = result.get("telemetry") or {}
    if telemetry.get("throttle_reasons_seen"):
        notes.append("GPU throttle reasons seen while timing: " + esc(", ".join(telemetry["throttle_reasons_seen"])))
    expectation = result.get("expectation") or {}
    if expectation:
        notes.append(f"expectation ({esc(expectation.get('hardware_key'))}): {esc(expectation.get('status'))}"
                     f" - {esc(expectation.get('detail'))}")
    env = {k: v for k, v in entry.run.manifest.items()
           if k not in ENV_SKIP and v is not None and not isinstance(v, (dict, list))}
    notes.append("environment: " + "; ".join(f"{esc(k)}={esc(v)}" for k, v in env.items()))
    return notes


def _file_links(entry: PairRun, site: Path) -> str:
    folder = entry.folder
    found = sorted(p for sub in ("results", "logs", "profiles") if (folder / sub).is_dir()
                   for p in (folder / sub).rglob("*") if p.is_file())
    if not found:
        return '<p class="note">No files of this pair in its run folder.</p>'
    shown = "".join(f"<li>{link(rel(p, site), p.relative_to(folder).as_posix())}</li>" for p in found[:MAX_LISTED_FILES])
    more = f'<p class="note">{len(found) - MAX_LISTED_FILES} more files in the folder.</p>' \
        if len(found) > MAX_LISTED_FILES else ""
    return f'<ul class="links">{shown}</ul>{more}'


def pair(collection: Collection, target: str, site: Path, root: Path) -> Page:
    """A pair's trend per hardware key against its stored expectation, then per key its latest run:
    variants, sample distributions, notes and files; then every run with its files."""
    history = collection.pairs[target]
    page = Page(f"aisp {target}")
    page.add(f"<p>{link(chapter_page_name(target.split(':')[0]), 'chapter ' + target.split(':')[0])}</p>")
    latest = latest_by_key(history)
    stored = {key: e for key, e in ((k, expectation_entry(root, history[-1].result, k)) for k in latest) if e}
    page.add("<h2>Trend</h2>", '<p class="note">Speedup per run with its 95% interval, one line per hardware '
             "key; the shaded band is the range of the stored expectation of that key (its interval and stored "
             "runs, hollow diamonds).</p>")
    page.figure(trend_figure(history, stored), "No run of this pair has a speedup and no expectation is stored.")
    header = ["variant", "median ms", "p10 - p90 ms", "cv", "n", "speedup [95% CI]", "verdict", "TFLOP/s",
              "GB/s", "peak bytes", "% roofline", "throttled", "reason"]
    for key, entry in sorted(latest.items()):
        page.add(f"<h2>Latest run on {esc(key)}: {esc(entry.run.run_id)} ({esc(entry.run.gpu)}, commit "
                 f"{esc(entry.run.commit)}) {verdict_badge(entry.result.get('verdict'))}</h2>",
                 table(header, _variant_rows(entry.result), numeric=range(1, 12)))
        page.figure(samples_figure(entry), "No raw samples in this run (not timed).")
        page.add("<h3>Notes</h3><ul>" + "".join(f"<li>{n}</li>" for n in _notes(entry)) + "</ul>",
                 "<h3>Files</h3>", _file_links(entry, site))
    rows = [[esc(e.run.run_id), esc(e.run.date), esc(e.run.commit), esc(e.run.gpu), esc(e.key),
             esc(_speedup_text(e.result.get("speedup"))), verdict_badge(e.result.get("verdict")),
             " ".join(link(rel(p, site), p.name) for p in (e.folder / "results").glob("benchmark_test_results.*"))]
            for e in reversed(history)]
    page.add("<h2>All runs</h2>", table(["run", "date", "commit", "GPU", "key", "speedup [95% CI]", "verdict",
                                         "results"], rows))
    return page
