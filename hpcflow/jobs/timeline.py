"""Draw a :class:`~hpcflow.jobs.report.GoodputReport` as an SVG timeline. Pure: returns text.

One row per attempt on a common time axis (seconds since the first submission). Each row shows
the queue wait before the attempt, then the attempt's run split into startup, training, lost
work and checkpointing. Within an attempt the split is by share, not by exact moment (the
runtime reports durations, not timestamps); signals are drawn as ticks at their real times.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from hpcflow.jobs.report import GoodputReport

COLOURS = {"pending": "#b0b0b0", "startup": "#f2b134", "training": "#4caf50",
           "lost": "#e53935", "checkpointing": "#1e88e5"}
_W, _LEFT, _ROW, _TOP = 900, 110, 34, 56


def render_svg(report: GoodputReport, signals: Sequence[Mapping[str, Any]] = ()) -> str:
    """The timeline as an SVG document.

    Args:
        report: the job's goodput report.
        signals: ledger ``signal`` events (``time``), drawn as ticks.
    """
    t0 = report.submitted_at
    span = max(report.wall_s, 1.0)
    scale = (_W - _LEFT - 20) / span
    height = _TOP + _ROW * max(len(report.attempts), 1) + 70

    def x(t: float) -> float:
        return _LEFT + max(0.0, t - t0) * scale

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{_W}" height="{height}" fill="white"/>',
        f'<text x="10" y="20" font-size="15">job {escape(report.job_id)}: goodput '
        f'{_pct(report.goodput)} of {report.wall_s:.0f} s wall</text>',
    ]
    ready = t0
    for row, att in enumerate(report.attempts):
        y = _TOP + row * _ROW
        parts.append(f'<text x="10" y="{y + 16}">attempt {att.restart + 1}</text>')
        parts.append(_rect(x(ready), y, x(att.start) - x(ready), "pending"))
        cursor = att.start
        run = max((att.end or (t0 + span)) - att.start, 0.0)
        total = att.startup_s + att.training_s + att.lost_s + att.checkpointing_s or 1.0
        for kind in ("startup", "training", "lost", "checkpointing"):
            width_s = run * getattr(att, f"{kind}_s") / total
            parts.append(_rect(x(cursor), y, width_s * scale, kind))
            cursor += width_s
        ready = att.end or cursor
    for sig in signals:
        sx = x(float(sig.get("time", t0)))
        parts.append(f'<line x1="{sx:.1f}" y1="{_TOP - 8}" x2="{sx:.1f}" '
                     f'y2="{_TOP + _ROW * len(report.attempts)}" stroke="black" '
                     f'stroke-dasharray="3,3"/>')
    legend_y = _TOP + _ROW * max(len(report.attempts), 1) + 20
    lx = 10.0
    for kind, colour in COLOURS.items():
        parts.append(f'<rect x="{lx}" y="{legend_y}" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{lx + 16}" y="{legend_y + 11}">{kind} '
                     f'{report.totals.get(kind, 0.0):.0f} s</text>')
        lx += 150
    parts.append(f'<text x="10" y="{legend_y + 36}" fill="#555">dashed: preemption signal; '
                 f'time axis 0 - {report.wall_s:.0f} s from submission</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _rect(x0: float, y: float, width: float, kind: str) -> str:
    if width <= 0.05:
        return ""
    return (f'<rect x="{x0:.1f}" y="{y}" width="{width:.1f}" height="{_ROW - 10}" '
            f'fill="{COLOURS[kind]}"><title>{kind}</title></rect>')


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"
