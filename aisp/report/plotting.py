"""Matplotlib figures without pyplot: no global backend switch, nothing left open between plots.

matplotlib is an optional extra (``plot``): it is imported only when a figure is made, so the CLI
and every report without a figure work on the core dependencies alone.
"""

from __future__ import annotations

import base64
import importlib.util
import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

INSTALL_HINT = "plots need matplotlib, an optional extra: pip install -e '.[plot]' (or pip install matplotlib)"


def available() -> bool:
    """Whether matplotlib can be imported here."""
    return importlib.util.find_spec("matplotlib") is not None


def new_figure(width: float = 8, height: float = 5) -> tuple[Figure, Axes]:
    """A figure with one axes, rendered by the Agg canvas when saved."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def png_base64(fig: Figure) -> str:
    """The figure as a base64 PNG, for embedding in a self-contained HTML page."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return base64.b64encode(buffer.getvalue()).decode("ascii")
