"""HTML building blocks of the dashboard: the page frame, tables, chart slots, relative links.

Every page lies in the site's root folder and loads ``assets/plotly.min.js`` (copied from the plotly
package once per site), so the site works from files with no server and no network.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from aisp.report.dashboard.charts import verdict_color

STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#222}
header{background:#263238;color:#fff;padding:.6em 1.5em}header a{color:#cfd8dc;margin-right:1em}
main{padding:0 1.5em 2em;max-width:90em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
td,th{border-bottom:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f5f7}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.reason{max-width:36em;overflow-wrap:anywhere;color:#555}
.verdict{display:inline-block;padding:0 .4em;border-radius:.3em;color:#fff;font-size:.85em;white-space:nowrap}
.note{color:#666}.plot{width:100%;min-height:200px}ul.links{columns:2;font-size:.9em}
"""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def verdict_badge(verdict: Any) -> str:
    return f'<span class="verdict" style="background:{verdict_color(str(verdict))}">{esc(verdict)}</span>'


def link(href: str, text: str) -> str:
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def rel(target: Path, site: Path) -> str:
    """``target`` as a link relative to the site's root folder (where every page lies)."""
    return Path(os.path.relpath(target.resolve(), site.resolve())).as_posix()


def table(header: Iterable[str], rows: Iterable[Iterable[str]], numeric: Iterable[int] = ()) -> str:
    """A table whose cells are already HTML; columns in ``numeric`` are right-aligned, a column
    named ``reason`` wraps within a fixed width."""
    header = list(header)
    numeric = set(numeric)
    classes = ["num" if i in numeric else "reason" if h == "reason" else "" for i, h in enumerate(header)]
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td class="{c}">{cell}</td>' if c else f"<td>{cell}</td>"
                                    for c, cell in zip(classes, row, strict=True)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class Page:
    """One HTML page being built: sections of HTML and the figures its script draws."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.parts: list[str] = []
        self.figures: dict[str, dict[str, Any]] = {}

    def add(self, *parts: str) -> None:
        self.parts.extend(parts)

    def figure(self, figure: dict[str, Any] | None, empty_note: str) -> None:
        """A chart slot drawn by plotly.js, or a note saying why there is no chart."""
        if figure is None:
            self.add(f'<p class="note">{esc(empty_note)}</p>')
            return
        slot = f"fig{len(self.figures)}"
        self.figures[slot] = figure
        self.add(f'<div class="plot" id="{slot}"></div>')

    def render(self) -> str:
        data = json.dumps(self.figures, allow_nan=False).replace("</", "<\\/")
        script = ("" if not self.figures else
                  '<script src="assets/plotly.min.js"></script><script>const FIGURES = ' + data + ";\n"
                  "for (const [id, f] of Object.entries(FIGURES)) {Plotly.newPlot(id, f.data, f.layout, "
                  "{responsive: true, displaylogo: false});}</script>")
        nav = link("index.html", "overview")
        return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{esc(self.title)}</title>"
                f"<style>{STYLE}</style></head><body><header>{nav}<b>{esc(self.title)}</b></header>"
                f"<main>{''.join(self.parts)}</main>{script}</body></html>\n")
