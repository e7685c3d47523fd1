"""The dashboard across runs: what it reads, what its charts hold, the CLI's errors, and the site
browsed in a real headless Chromium (Debian's, driven by selenium): every page loads with no console
error, every chart slot holds plotly's SVG, every relative link resolves to a file."""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from conftest import FIXTURE_PAIRS, REPO
from dashboard_runs import write_runs
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.harness.artifacts import atomic_write_json
from aisp.report import dashboard
from aisp.report.dashboard.charts import NEUTRAL, speedup_figure, trend_figure, verdict_color
from aisp.report.dashboard.collect import collect, expectation_entry, latest_by_key

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
needs_plotly = pytest.mark.skipif(dashboard.plotly_js() is None, reason="plotly (the dashboard extra) is not installed")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> Path:
    """Four synthetic H200 runs, a verify-only run, a folder that is no run, and one real CPU run of
    the harness (a fixture pair), side by side."""
    root = tmp_path_factory.mktemp("artifacts")
    write_runs(root)
    verify = root / "20261124-000000"
    atomic_write_json(verify / "summary.json", {"run_id": verify.name, "hardware_key": "h200",
                                                "options": {"verify_only": True}, "results": [
        {"target": "ch13:training_standard", "group": "ch13", "name": "training_standard", "verdict": "ok",
         "reason": None, "workload": {}, "baseline": None, "variants": [], "best": None, "speedup": None}]})
    (root / "notes").mkdir()
    result = CliRunner().invoke(app, ["bench", "run", "--root", str(FIXTURE_PAIRS), "-t", "pairs:good",
                                      "--artifacts-dir", str(root), "--iterations", "3", "--warmup", "1",
                                      "--warmup-s", "0"])
    assert result.exit_code in (0, 1), result.output  # 1: a CPU timing verdict on a busy host
    return root


@pytest.fixture(scope="module")
def site(artifacts, tmp_path_factory) -> Path:
    if dashboard.plotly_js() is None:
        pytest.skip("plotly (the dashboard extra) is not installed")
    out = tmp_path_factory.mktemp("site")
    built = dashboard.build_site(artifacts, out, REPO)
    assert built.runs == 6 and built.pairs == 9
    return out


def test_collect_reads_runs_oldest_first_and_names_folders_it_skips(artifacts):
    found = collect(artifacts)
    assert [r.run_id for r in found.runs][:4] == sorted(r.run_id for r in found.runs)[:4]
    assert [(p.name, why) for p, why in found.skipped] == [("notes", "no summary.json")]
    assert len(found.pairs["ch13:training_standard"]) == 5


def test_a_verify_only_run_does_not_replace_the_latest_timed_result(artifacts):
    history = collect(artifacts).pairs["ch13:training_standard"]
    assert history[-1].run.verify_only
    assert latest_by_key(history)["h200"].run.run_id == "20261123-090003"


def test_unknown_verdicts_draw_in_a_neutral_colour_with_a_legend_entry(artifacts):
    latest = [e for h in collect(artifacts).pairs.values() for e in latest_by_key(h).values()]
    figure = speedup_figure(latest)
    names = {t["name"]: t["marker"]["color"] for t in figure["data"]}
    assert names["a-verdict-added-later"] == NEUTRAL and verdict_color("ok") != NEUTRAL
    assert figure["layout"]["xaxis"]["type"] == "log"
    assert "1x" in figure["layout"]["xaxis"]["ticktext"]


def test_trend_has_the_stored_expectation_band_of_its_key(artifacts):
    history = collect(artifacts).pairs["ch13:training_standard"]
    stored = expectation_entry(REPO, history[0].result, "h200")
    assert stored is not None  # ch13/expectations_h200.json holds this pair
    figure = trend_figure(history, {"h200": stored})
    band = figure["layout"]["shapes"][0]
    assert band["y0"] <= stored["speedup"]["value"] <= band["y1"]
    runs = next(t for t in figure["data"] if t["name"] == "runs (h200)")
    assert len(runs["x"]) == 4 and all("commit" in text and "GPU" in text for text in runs["text"])


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.hrefs += [v for k, v in attrs if k in ("href", "src") and v]


def test_every_relative_link_of_every_page_resolves(site):
    pages = sorted(site.glob("*.html"))
    assert {"index.html", "ch13.html", "pair-ch13_training_standard.html", "pair-pairs_good.html"} <= \
        {p.name for p in pages}
    for page in pages:
        parser = _Links()
        parser.feed(page.read_text())
        assert parser.hrefs, page
        for href in parser.hrefs:
            assert (site / unquote(href)).exists(), f"{page.name}: {href}"
    pair_page = (site / "pair-ch13_training_standard.html").read_text()
    assert "logs/pair.log" in pair_page and "profiles/trace_summary.txt" in pair_page
    assert "sw_power_cap" in pair_page and "environment: hardware_key=h200" in pair_page
    assert "torch 2.11.0+cu130, CUDA 13.0, driver 580.159.04" in (site / "index.html").read_text()


def test_the_site_holds_every_run_as_one_tidy_csv(site):
    pd = pytest.importorskip("pandas")
    frame = pd.read_csv(site / "data" / "results.csv")
    assert set(frame["run_id"].astype(str)) >= {"20261120-090000", "20261123-090003"}
    assert pd.api.types.is_numeric_dtype(frame["speedup"])


@needs_plotly
def test_cli_builds_the_site_and_says_why_it_cannot(artifacts, tmp_path, monkeypatch):
    result = CliRunner().invoke(app, ["report", "dashboard", str(artifacts), "-o", str(tmp_path / "site")])
    assert result.exit_code == 0, result.output
    assert re.search(r"Wrote .*index.html \(\d+ pages, 6 runs, 9 pairs\)", result.output)
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(app, ["report", "dashboard", str(empty), "-o", str(tmp_path / "none")])
    assert result.exit_code == 2 and result.output.count("\n") == 1 and "no run folder" in result.output
    assert not (tmp_path / "none").exists()
    monkeypatch.setattr(dashboard, "plotly_js", lambda: None)
    result = CliRunner().invoke(app, ["report", "dashboard", str(artifacts), "-o", str(tmp_path / "x")])
    assert result.exit_code == 2 and result.output.strip() == f"error: {dashboard.INSTALL_HINT}"


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Debian's chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def test_pages_load_without_console_errors_and_draw_their_charts(site, browser):
    from selenium.webdriver.support.ui import WebDriverWait

    drawn = 0
    for page in sorted(site.glob("*.html")):
        browser.get(page.as_uri())
        slots = browser.execute_script("return document.querySelectorAll('div.plot').length")
        WebDriverWait(browser, 20).until(lambda d: d.execute_script(
            "return [...document.querySelectorAll('div.plot')].every(p => p.querySelector('svg.main-svg'))"))
        marks = browser.execute_script("return document.querySelectorAll('div.plot g.trace').length")
        assert marks >= slots, f"{page.name}: {slots} charts but {marks} drawn traces"
        drawn += slots
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, f"{page.name}: {errors}"
        for href in browser.execute_script("return [...document.querySelectorAll('a')].map(a => a.href)"):
            assert Path(unquote(urlparse(href).path)).exists(), f"{page.name}: {href}"
    assert drawn >= 20


def test_ratios_a_log_axis_cannot_take_are_left_off(artifacts):
    history = collect(artifacts).pairs["ch13:training_standard"]
    history[0].result["speedup"] = {"value": "inf", "low": 2.0, "high": "inf"}
    history[1].result["speedup"] = {"value": 0.0, "low": 0.0, "high": 0.0}
    figure = trend_figure(history, {})
    assert len(figure["data"][0]["x"]) == 2  # four timed runs, two plottable
    assert speedup_figure(history[:2]) is None


def test_a_single_run_trend_spans_days_and_its_axis_covers_the_interval(artifacts):
    history = collect(artifacts).pairs["pairs:good"]
    figure = trend_figure(history, {})
    ratio = history[0].result["speedup"]
    low, high = figure["layout"]["xaxis"]["range"]
    assert high > low and figure["layout"]["xaxis"]["type"] == "date"
    axis = figure["layout"]["yaxis"]
    shown = axis.get("tickvals") or [ratio["low"], ratio["high"]]
    assert min(shown) <= ratio["high"] and max(shown) >= ratio["low"]


def test_a_merged_run_named_by_its_folder_is_dated_by_its_first_shard(tmp_path):
    """``aisp report merge … -o bookmerged``: its run id holds no date; its shards' ids do. A copied
    folder's write time (the old fallback) made it the newest run and its results the 'latest'."""
    merged = tmp_path / "bookmerged"
    atomic_write_json(merged / "summary.json", {"run_id": "bookmerged", "hardware_key": "h200", "results": []})
    atomic_write_json(merged / "manifest.json", {"shards": [{"run_id": "20261128-041715"}, {"run_id": "20261128-040614"}]})
    later = tmp_path / "20261128-084510"
    atomic_write_json(later / "summary.json", {"run_id": later.name, "hardware_key": "h200", "results": []})
    runs = collect(tmp_path).runs
    assert [r.run_id for r in runs] == ["bookmerged", "20261128-084510"]
    assert runs[0].date == "2026-11-28T04:06:14"


def test_a_pair_whose_newest_result_has_no_speedup_is_listed_under_the_chart(tmp_path):
    """The chart draws the newest result per pair; one that timed out in the newest run has no point,
    so the page names it, with its verdict, reason and run, instead of leaving it out silently."""
    from aisp.report.dashboard.pages import chapter, overview

    def result(verdict, speedup):
        return {"target": "ch01:gemm", "group": "ch01", "name": "gemm", "verdict": verdict, "speedup": speedup,
                "reason": None if speedup else "timed out after 40 s", "baseline": None, "variants": []}
    for run_id, verdict, speedup in (("20261128-040000", "ok", {"value": 9.3, "low": 9.1, "high": 9.5}),
                                     ("20261128-080000", "timeout", None)):
        atomic_write_json(tmp_path / run_id / "summary.json",
                          {"run_id": run_id, "hardware_key": "h200", "results": [result(verdict, speedup)]})
    found = collect(tmp_path)
    for page in (overview(found, tmp_path / "site"), chapter(found, "ch01", ["ch01:gemm"])):
        html = page.render()
        assert "not drawn: 1 pair whose newest result has no speedup" in html
        assert "ch01:gemm (h200): timeout: timed out after 40 s (run 20261128-080000)" in html
