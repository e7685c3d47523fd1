"""A static dashboard across runs (``aisp report dashboard ARTIFACTS_DIR -o site/``).

Reads every run folder under an artifacts folder and writes a site that works from files: an
overview, a page per chapter and a page per pair, with interactive Plotly charts (speedup on a log
axis, trends against stored expectations, sample distributions, rooflines). plotly.js comes from
the ``plotly`` package (the optional ``dashboard`` extra), copied once into ``site/assets/``.
"""

from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass
from pathlib import Path

from aisp.harness.artifacts import atomic_write_text
from aisp.report import tidy
from aisp.report.dashboard import pages
from aisp.report.dashboard.collect import Collection, collect

INSTALL_HINT = ("the dashboard needs plotly, an optional extra: pip install -e '.[dashboard]' "
                "(or pip install plotly)")


def plotly_js() -> Path | None:
    """The plotly.min.js bundled in the plotly package, or None where plotly is not installed."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"
    return path if path.exists() else None


@dataclass(frozen=True)
class Site:
    """What a build wrote."""

    index: Path
    pages: int
    runs: int
    pairs: int


def _tidy_csv(collection: Collection) -> str:
    table = []
    for run in collection.runs:
        fields = tidy.run_fields({"run_id": run.run_id, "hardware_key": run.hardware_key}, run.manifest, run.run_id)
        table += tidy.rows(run.results, fields)
    return tidy.csv_text(table)


def build_site(artifacts_dir: Path, output: Path, root: Path) -> Site:
    """Write the site for ``artifacts_dir`` into ``output``; ``root`` holds the chapters whose
    ``expectations_<key>.json`` give the trend charts their bands. FileNotFoundError without plotly,
    ValueError when no run folder is found (nothing is written then)."""
    script = plotly_js()
    if script is None:
        raise FileNotFoundError(INSTALL_HINT)
    collection = collect(artifacts_dir)
    if not collection.runs:
        raise ValueError(f"no run folder (with a readable summary.json) under {artifacts_dir}")
    output.mkdir(parents=True, exist_ok=True)
    (output / "assets").mkdir(exist_ok=True)
    shutil.copyfile(script, output / "assets" / "plotly.min.js")
    atomic_write_text(output / "data" / "results.csv", _tidy_csv(collection))
    written = {"index.html": pages.overview(collection, output)}
    for chapter, targets in collection.chapters().items():
        written[pages.chapter_page_name(chapter)] = pages.chapter(collection, chapter, targets)
        for target in targets:
            written[pages.pair_page_name(target)] = pages.pair(collection, target, output, root)
    for name, page in written.items():
        atomic_write_text(output / name, page.render())
    return Site(output / "index.html", len(written), len(collection.runs), len(collection.pairs))
