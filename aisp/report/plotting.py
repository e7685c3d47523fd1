"""Matplotlib figures without pyplot: no global backend switch, nothing left open between plots."""

from __future__ import annotations

import base64
import io

from matplotlib.axes import Axes
from matplotlib.figure import Figure


def new_figure(width: float = 8, height: float = 5) -> tuple[Figure, Axes]:
    """A figure with one axes, rendered by the Agg canvas when saved."""
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def png_base64(fig: Figure) -> str:
    """The figure as a base64 PNG, for embedding in a self-contained HTML page."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return base64.b64encode(buffer.getvalue()).decode("ascii")
