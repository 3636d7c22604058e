"""Goodput against the checkpoint interval, one curve per node count, as an SVG document. Pure:
returns text, drawn the way :mod:`hpcflow.jobs.timeline` draws the report (plain SVG
elements, escaped labels, white background, a legend under the plot).

The x axis is logarithmic (intervals from a tenth to ten times the best one); each curve marks
its best interval with a dot.
"""

from __future__ import annotations

import math
from dataclasses import replace
from html import escape

from hpcflow.plan.goodput import GoodputInputs, predict

PALETTE = ("#1e88e5", "#4caf50", "#e53935", "#f2b134", "#8e24aa", "#00897b")
_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM = 900, 460, 70, 20, 40, 90
Curve = list[tuple[float, float]]


def goodput_curves(inputs: GoodputInputs, node_counts: list[int],
                   points: int = 41) -> dict[int, tuple[Curve, tuple[float, float]]]:
    """For each node count: (interval_s, goodput) points, and the best (interval_s, goodput).

    The intervals span a tenth to ten times the best interval of ``inputs`` (log-spaced), the
    same span for every curve so they can be compared.

    Raises:
        ValueError: ``inputs`` is invalid (:func:`hpcflow.plan.goodput.predict`).
    """
    centre = predict(replace(inputs, interval_s=None)).interval_s
    grid = [centre * 10 ** (-1 + 2 * i / (points - 1)) for i in range(points)]
    out = {}
    for nodes in node_counts:
        base = replace(inputs, nodes=nodes, interval_s=None)
        best = predict(base)
        curve = [(t, predict(replace(base, interval_s=t)).goodput) for t in grid]
        out[nodes] = (curve, (best.interval_s, best.goodput))
    return out


def render_svg(curves: dict[int, tuple[Curve, tuple[float, float]]], title: str) -> str:
    """The curves as an SVG document (see the module docstring)."""
    xs = [t for curve, _ in curves.values() for t, _ in curve]
    ys = [g for curve, _ in curves.values() for _, g in curve]
    x0, x1 = math.log10(min(xs)), math.log10(max(xs))
    y0 = max(0.0, math.floor(min(ys) * 20) / 20)
    y1 = min(1.0, math.ceil(max(ys) * 20) / 20 or 1.0)
    if y1 <= y0:
        y1 = y0 + 0.05
    pw, ph = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def px(t: float) -> float:
        return _LEFT + (math.log10(t) - x0) / ((x1 - x0) or 1) * pw

    def py(g: float) -> float:
        return _TOP + (1 - (g - y0) / (y1 - y0)) * ph

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{_W}" height="{_H}" fill="white"/>',
             f'<text x="10" y="22" font-size="15">{escape(title)}</text>',
             f'<rect x="{_LEFT}" y="{_TOP}" width="{pw}" height="{ph}" fill="none" '
             f'stroke="#999"/>']
    for i in range(6):
        g = y0 + (y1 - y0) * i / 5
        parts.append(f'<text x="{_LEFT - 6}" y="{py(g) + 4:.1f}" text-anchor="end">'
                     f'{100 * g:.1f}%</text>')
    for decade in range(math.ceil(x0), math.floor(x1) + 1):
        x = px(10 ** decade)
        parts.append(f'<line x1="{x:.1f}" y1="{_TOP}" x2="{x:.1f}" y2="{_TOP + ph}" '
                     f'stroke="#eee"/>')
        parts.append(f'<text x="{x:.1f}" y="{_TOP + ph + 16}" text-anchor="middle">'
                     f'{_duration(10 ** decade)}</text>')
    legend_y = _TOP + ph + 40
    for i, (nodes, (curve, (bt, bg))) in enumerate(sorted(curves.items())):
        colour = PALETTE[i % len(PALETTE)]
        path = " ".join(f"{px(t):.1f},{py(g):.1f}" for t, g in curve)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                     f'stroke-width="2"><title>{nodes} nodes</title></polyline>')
        parts.append(f'<circle cx="{px(bt):.1f}" cy="{py(bg):.1f}" r="4" fill="{colour}">'
                     f'<title>{nodes} nodes: best {_duration(bt)}, {100 * bg:.2f}%</title>'
                     '</circle>')
        lx = 10 + 220 * (i % 4)
        ly = legend_y + 18 * (i // 4)
        parts.append(f'<rect x="{lx}" y="{ly}" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{lx + 16}" y="{ly + 11}">{nodes} nodes: best '
                     f'{_duration(bt)}, {100 * bg:.1f}%</text>')
    parts.append(f'<text x="10" y="{_H - 8}" fill="#555">x: checkpoint interval (training '
                 'time between saves, log scale); y: expected goodput (closed form)</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"
