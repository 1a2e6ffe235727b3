"""Per-epoch metric charts as inline SVG, drawn on the server: a page shows its
charts without JavaScript, and no chart library is shipped. Each metric is
charted with its `val_` twin (loss with val_loss); a value that was not a
finite number (a diverged loss) is a gap in the line."""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

W, H = 600, 240
LEFT, RIGHT, TOP, BOTTOM = 70, 16, 14, 40
MAX_DOTS = 300          # beyond this many epochs a series is drawn as a line only
FIRST = ("loss", "accuracy")


@dataclass(frozen=True)
class Series:
    name: str
    points: list[tuple[int, float | None]]

    @property
    def last(self) -> float | None:
        return next((v for _, v in reversed(self.points) if v is not None), None)


@dataclass(frozen=True)
class Chart:
    key: str
    series: list[Series]
    svg: Markup


def _base(name: str) -> str:
    return name[4:] if name.startswith("val_") and len(name) > 4 else name


def fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e5 or abs(value) < 1e-3:
        return f"{value:.2e}"
    return f"{value:.4g}"


def nice_ticks(lo: float, hi: float, want: int = 5) -> list[float]:
    span = hi - lo
    raw = span / max(1, want - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks, t = [], first
    while t <= hi + step * 1e-9:
        if t >= lo - step * 1e-9:
            ticks.append(round(t, 12))
        t += step
    return ticks


def _y_domain(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if lo == hi:
        pad = abs(lo) * 0.1 or 1.0
        return lo - pad, hi + pad
    pad = (hi - lo) * 0.08
    return lo - pad, hi + pad


def _svg(key: str, series: list[Series]) -> Markup:
    epochs = sorted({e for s in series for e, _ in s.points})
    values = [v for s in series for _, v in s.points if v is not None]
    x0, x1 = (epochs[0], epochs[-1]) if epochs[0] != epochs[-1] else (epochs[0] - 1, epochs[0] + 1)
    title_id = f"chart-{escape(key)}-title"
    out = [f'<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-labelledby="{title_id}" '
           f'data-metric="{escape(key)}" preserveAspectRatio="xMidYMid meet">',
           # Markup + str would escape the str: the <title> element is built as one string.
           f'<title id="{title_id}">{escape(key)} by epoch: '
           f'{escape(", ".join(f"{s.name} {fmt(s.last)}" for s in series if s.last is not None))}</title>']
    y0, y1 = _y_domain(values) if values else (0.0, 0.0)
    if not values or not math.isfinite((y1 - y0) * 2):  # nothing to draw, or a span beyond floats
        what = "no finite values" if not values else "values too far apart to draw"
        out.append(f'<text class="empty" x="{W / 2}" y="{H / 2}" text-anchor="middle">{what}</text></svg>')
        return Markup("".join(out))
    px = lambda e: LEFT + (e - x0) / (x1 - x0) * (W - LEFT - RIGHT)  # noqa: E731
    py = lambda v: TOP + (y1 - v) / (y1 - y0) * (H - TOP - BOTTOM)  # noqa: E731

    for t in nice_ticks(y0, y1):
        y = py(t)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text class="tick" x="{LEFT - 8}" y="{y + 5:.1f}" text-anchor="end">{fmt(t)}</text>')
    xticks = [t for t in nice_ticks(x0, x1, 8) if float(t).is_integer() and epochs[0] <= t <= epochs[-1]]
    for t in xticks or epochs[:1]:
        x = px(t)
        out.append(f'<line class="axis" x1="{x:.1f}" x2="{x:.1f}" y1="{H - BOTTOM}" y2="{H - BOTTOM + 4}"/>'
                   f'<text class="tick" x="{x:.1f}" y="{H - BOTTOM + 20}" text-anchor="middle">{int(t)}</text>')
    out.append(f'<line class="axis" x1="{LEFT}" x2="{W - RIGHT}" y1="{H - BOTTOM}" y2="{H - BOTTOM}"/>'
               f'<text class="label" x="{W - RIGHT}" y="{H - 2}" text-anchor="end">epoch</text>')

    for i, s in enumerate(series):
        for segment in _segments(s.points):
            pts = " ".join(f"{px(e):.1f},{py(v):.1f}" for e, v in segment)
            out.append(f'<polyline class="line s{i}" points="{pts}"/>')
        if len(s.points) <= MAX_DOTS:
            for e, v in s.points:
                if v is None:
                    continue
                out.append(f'<circle class="pt s{i}" data-series="{escape(s.name)}" data-epoch="{e}" '
                           f'cx="{px(e):.1f}" cy="{py(v):.1f}" r="4.5">'
                           f'<title>epoch {e}: {escape(s.name)} {fmt(v)}</title></circle>')
    out.append("</svg>")
    return Markup("".join(out))


def _segments(points: Sequence[tuple[int, float | None]]) -> Iterable[list[tuple[int, float]]]:
    current: list[tuple[int, float]] = []
    for e, v in points:
        if v is None:
            if current:
                yield current
            current = []
        else:
            current.append((e, v))
    if current:
        yield current


def _order(key: str) -> tuple[int, str]:
    return (FIRST.index(key) if key in FIRST else len(FIRST), key)


def build(rows: Iterable) -> list[Chart]:
    """Charts from epoch rows (anything with .epoch and .metrics), one per metric family."""
    rows = sorted(rows, key=lambda r: r.epoch)
    names = sorted({name for r in rows for name in (r.metrics or {})})
    families: dict[str, list[str]] = {}
    for name in names:
        families.setdefault(_base(name), []).append(name)
    charts = []
    for key in sorted(families, key=_order):
        members = sorted(families[key], key=lambda n: (n.startswith("val_"), n))
        series = [Series(n, [(r.epoch, (r.metrics or {}).get(n)) for r in rows if n in (r.metrics or {})])
                  for n in members]
        charts.append(Chart(key, series, _svg(key, series)))
    return charts
