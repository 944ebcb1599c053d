# SPDX-License-Identifier: MIT
"""A standalone SVG of live and pinned bytes over time, one panel per
process, with an event lane of allocations, frees, failures and cache
hits and misses.  The replay hands every change to this observer, which
keeps at most a few values per half pixel."""

import math
from xml.sax.saxutils import escape as _xml_escape

from .reports import fmt_bytes, fmt_ns
# ---------------------------------------------------------------------------

PALETTE = ["#1f6fb4", "#d9480f", "#2b8a3e", "#7048e8", "#c2255c",
           "#0c8599", "#e67700", "#5c940d"]
HOST_COLOUR = "#6c757d"
HIT_COLOUR = "#2b8a3e"
MISS_COLOUR = "#e67700"
FAIL_COLOUR = "#e03131"


def dev_colour(dev, devs):
    if dev is None or dev < 0:
        return HOST_COLOUR
    gpus = [d for d in devs if d >= 0]
    i = gpus.index(dev) if dev in gpus else dev
    return PALETTE[i % len(PALETTE)]


def xml(s):
    return _xml_escape(str(s), {'"': "&quot;"})


def nice_step(span, target):
    if span <= 0:
        return 1.0
    raw = span / max(1, target)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def fmt_tick(v, step):
    if step >= 1 and abs(v - round(v)) < 1e-9:
        return "%d" % round(v)
    dec = max(0, -int(math.floor(math.log10(step) + 1e-9)))
    if abs(step * 10 ** dec - round(step * 10 ** dec)) > 1e-6:
        dec += 1
    return "%.*f" % (dec, v)


def time_unit(span_ns):
    if span_ns >= 2e9:
        return "s", 1e9
    if span_ns >= 2e6:
        return "ms", 1e6
    return "\u00b5s", 1e3


def byte_unit(maxv):
    for u, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if maxv >= f:
            return u, f
    return "B", 1


INSET = 10      # px between the y axis and the first event


class Steps:
    """A step function reduced to its first, lowest, highest and last
    value in each half-pixel column."""

    __slots__ = ("cols",)

    def __init__(self):
        self.cols = []          # [bucket, first, lo, hi, last, n]

    def add(self, b, v):
        cols = self.cols
        if cols and cols[-1][0] == b:
            c = cols[-1]
            if v < c[2]:
                c[2] = v
            if v > c[3]:
                c[3] = v
            c[4] = v
            c[5] += 1
        else:
            cols.append([b, v, v, v, v, 1])

    def x_first(self):
        return self.cols[0][0] / 2.0

    def path(self, fy, x_end):
        """SVG path data: at most a few commands per pixel."""
        cmds = []
        last_y = None
        for b, first, lo, hi, last, n in self.cols:
            x = b / 2.0
            y0, y1 = round(fy(first), 1), round(fy(last), 1)
            if not cmds:
                cmds.append("M%.1f,%.1f" % (x, y0))
            else:
                cmds.append("H%.1f" % x)
                if y0 != last_y:
                    cmds.append("V%.1f" % y0)
            if n > 1:
                ylo, yhi = round(fy(hi), 1), round(fy(lo), 1)
                for y in (yhi, ylo) if y0 >= y1 else (ylo, yhi):
                    cmds.append("V%.1f" % y)
                cmds.append("V%.1f" % y1)
            last_y = y1
        if cmds:
            cmds.append("H%.1f" % x_end)
        return "".join(cmds)


class Plot:
    """An analysis observer that collects what the SVG draws."""

    def __init__(self, width=1200):
        self.width = width
        self.steps = {}         # (proc index, kind, dev) -> Steps
        self.marks = {}         # proc index -> {(col, dev, kind): x}
        self.counts = {}        # proc index -> markers seen
        self.record = None

    def prepare(self, results):
        self.origin = min(r.proc.t0 for r in results)
        self.t_last = max(r.proc.t_end for r in results)
        self.span = max(self.t_last - self.origin, 1000)
        self.tu, self.tf = time_unit(self.span)
        self.ML, self.MR = 84, 30
        self.PW = self.width - self.ML - self.MR
        # Round the time axis up to a whole tick when that costs little.
        xstep = nice_step(self.span / self.tf, 10)
        x_max = math.ceil(self.span / self.tf / xstep - 1e-9) * xstep
        if x_max > self.span / self.tf * 1.15:
            x_max = self.span / self.tf
        self.xstep, self.x_max = xstep, x_max
        self.fx_scale = (self.PW - INSET) / x_max

    def fx(self, t):
        return self.ML + INSET + ((t - self.origin) / self.tf) * self.fx_scale

    def counter(self, res, s, t, v):
        k = (res.proc.index, s.kind, s.dev)
        st = self.steps.get(k)
        if st is None:
            st = self.steps[k] = Steps()
        st.add(int(round(self.fx(t) * 2)), v)

    def marker(self, res, t, dev, kind):
        i = res.proc.index
        self.counts[i] = self.counts.get(i, 0) + 1
        x = self.fx(t)
        m = self.marks.setdefault(i, {})
        key = (int(x // 3), dev, kind)
        if key not in m:
            m[key] = x


def plot_svg(results, plot):
    """The SVG text, from the results and what `plot` collected."""
    origin, t_last = plot.origin, plot.t_last
    tu = plot.tu
    fx = plot.fx
    fx_scale = plot.fx_scale
    xstep, x_max = plot.xstep, plot.x_max
    width = plot.width
    devs = sorted(set(d for r in results for d in
                      list(r.live_s) + list(r.pin_s)))
    devs_gpu = sorted(d for d in devs if d >= 0) + [d for d in devs if d < 0]

    W = width
    ML, MR = 84, 30
    PW = W - ML - MR
    title_h = 66
    legend_items = []
    for d in devs_gpu:
        c = dev_colour(d, devs)
        lbl = "host" if d < 0 else "dev %d" % d
        legend_items.append(("line", c, "%s live" % lbl))
        if any(d in r.pin_s for r in results):
            legend_items.append(("dash", c, "%s pinned" % lbl))
    kinds = set(k[2] for m in plot.marks.values() for k in m)
    legend_items += [("up", "#495057", "alloc"), ("down", "#495057", "free")]
    if "failed" in kinds:
        legend_items.append(("cross", FAIL_COLOUR, "failed alloc"))
    cache = "hit" in kinds or "miss" in kinds
    if cache:
        legend_items += [("hit", HIT_COLOUR, "cache hit"),
                         ("miss", MISS_COLOUR, "cache miss")]
    legend_h = 30
    panel_head = 24
    PH = 230 if len(results) <= 2 else 170
    lane_h = 46 if cache else 28
    tick_h = 22
    gap = 22
    panel_total = panel_head + PH + lane_h + tick_h + gap
    H = title_h + legend_h + panel_total * len(results) + 34

    o = []
    o.append('<?xml version="1.0" encoding="UTF-8"?>')
    o.append('<svg xmlns="http://www.w3.org/2000/svg" version="1.1" '
             'width="%d" height="%d" viewBox="0 0 %d %d" '
             'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" '
             'font-size="12">' % (W, H, W, H))
    exe = results[0].proc.exe
    o.append("<title>%s</title>" % xml("gdrhook: %s" % exe))
    o.append('<desc>Live and pinned GPU memory over time, written by '
             'gdrhook-trace</desc>')
    o.append('<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>'
             % (W, H))
    o.append('<text class="title" x="%d" y="28" font-size="19" '
             'font-weight="bold" fill="#212529">%s</text>'
             % (ML, xml(exe)))
    pk = []
    for d in devs_gpu:
        m = max((r.live_s[d].peak for r in results if d in r.live_s),
                default=0)
        pk.append("%s %s" % ("host" if d < 0 else "dev %d" % d,
                             fmt_bytes(m)))
    sub = "GPU memory over time \u2014 %d process%s, %s; peak live: %s" % (
        len(results), "" if len(results) == 1 else "es",
        fmt_ns(t_last - origin).replace(" us", " \u00b5s"),
        ", ".join(pk) if pk else "none")
    o.append('<text x="%d" y="50" font-size="13" fill="#495057">%s</text>'
             % (ML, xml(sub)))

    # Legend
    lx = ML
    ly = title_h + 12
    o.append('<g class="legend">')
    for kind, c, label in legend_items:
        if kind == "line":
            o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" '
                     'stroke-width="2.5"/>' % (lx, ly, lx + 22, ly, c))
        elif kind == "dash":
            o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" '
                     'stroke-width="2" stroke-dasharray="5,3"/>'
                     % (lx, ly, lx + 22, ly, c))
        elif kind == "up":
            o.append(marker_up(lx + 11, ly + 3, c))
        elif kind == "down":
            o.append(marker_down(lx + 11, ly - 3, c))
        elif kind == "hit":
            o.append(marker_hit(lx + 11, ly, c))
        elif kind == "miss":
            o.append(marker_miss(lx + 11, ly, c))
        else:
            o.append(marker_cross(lx + 11, ly, c))
        o.append('<text x="%d" y="%d" fill="#343a40">%s</text>'
                 % (lx + 28, ly + 4, xml(label)))
        lx += 28 + 7 * len(label) + 22
        if lx > W - MR - 120:
            lx = ML
            ly += 18
    o.append("</g>")

    xticks = []
    v = 0.0
    while v <= x_max + 1e-9:
        xticks.append(v)
        v += xstep

    y0 = title_h + legend_h + (ly - title_h - 12)
    for pi, res in enumerate(results):
        p = res.proc
        top = y0 + pi * panel_total + panel_head
        bot = top + PH
        label = "pid %d" % p.pid
        if p.inst:
            label += " (image %d)" % (p.inst + 1)
        label += " \u00b7 %s" % p.exe.rsplit("/", 1)[-1]
        if p.parent is not None:
            label += " \u00b7 forked from %d" % p.parent.pid
        if p.exit is None:
            label += " \u00b7 no exit record"
        o.append('<g class="panel" data-pid="%d">' % p.pid)
        o.append('<text x="%d" y="%d" font-size="13" font-weight="bold" '
                 'fill="#343a40">%s</text>' % (ML, top - 8, xml(label)))
        maxv = 0
        for tab in (res.live_s, res.pin_s):
            for s in tab.values():
                maxv = max(maxv, s.peak)
        bu, bf = byte_unit(maxv)
        ystep = nice_step(maxv / bf * 1.08, 5) if maxv else 1
        ytop = (math.ceil(maxv / bf * 1.04 / ystep) * ystep) if maxv else 1
        ytop = max(ytop, ystep)

        def fy(val, bot=bot, bf=bf, ytop=ytop):
            return bot - (val / bf) / ytop * PH

        o.append('<rect x="%d" y="%d" width="%d" height="%d" fill="#f8f9fa" '
                 'stroke="none"/>' % (ML, top, PW, PH))
        yv = 0.0
        while yv <= ytop + 1e-9:
            y = bot - yv / ytop * PH
            o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" '
                     'stroke="%s" stroke-width="1"/>'
                     % (ML, y, ML + PW, y, "#adb5bd" if yv == 0
                        else "#dee2e6"))
            o.append('<text x="%d" y="%.1f" text-anchor="end" '
                     'fill="#495057">%s</text>'
                     % (ML - 6, y + 4, fmt_tick(yv, ystep)))
            yv += ystep
        for xv in xticks:
            x = ML + INSET + xv * fx_scale
            o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" '
                     'stroke="#e9ecef" stroke-width="1"/>'
                     % (x, top, x, bot))
        o.append('<text x="%d" y="%.1f" text-anchor="middle" fill="#343a40" '
                 'transform="rotate(-90 %d %.1f)">memory (%s)</text>'
                 % (ML - 56, (top + bot) / 2, ML - 56, (top + bot) / 2, bu))
        if not maxv:
            o.append('<text x="%.1f" y="%.1f" text-anchor="middle" '
                     'fill="#868e96">no GPU memory allocated</text>'
                     % (ML + PW / 2, (top + bot) / 2))
        x_end = fx(p.t_end)
        x_beg = fx(p.t0)
        for xa, xb in ((ML, x_beg), (x_end, ML + PW)):
            if xb - xa >= 1 + (INSET if xa == ML else 0):
                o.append('<rect class="idle" x="%.1f" y="%d" width="%.1f" '
                         'height="%d" fill="#e9ecef"/>'
                         % (xa, top, xb - xa, PH))
                if xb - xa > 90:
                    o.append('<text x="%.1f" y="%d" text-anchor="middle" '
                             'font-size="11" fill="#868e96">%s</text>'
                             % ((xa + xb) / 2, top + 16,
                                "not started" if xa == ML else
                                "exited" if p.exit is not None else
                                "no more records"))
        pi = p.index
        for d in devs_gpu:
            c = dev_colour(d, devs)
            st = plot.steps.get((pi, "live", d))
            if st is not None:
                path = st.path(fy, x_end)
                o.append('<path class="area" d="%sV%.1fH%.1fZ" fill="%s" '
                         'fill-opacity="0.10" stroke="none"/>'
                         % (path, bot, st.x_first(), c))
                o.append('<path class="series live" data-pid="%d" '
                         'data-dev="%d" d="%s" fill="none" stroke="%s" '
                         'stroke-width="2" stroke-linejoin="round"/>'
                         % (p.pid, d, path, c))
            st = plot.steps.get((pi, "pinned", d))
            if st is not None:
                path = st.path(fy, x_end)
                o.append('<path class="series pinned" data-pid="%d" '
                         'data-dev="%d" d="%s" fill="none" stroke="%s" '
                         'stroke-width="1.8" stroke-dasharray="6,3" '
                         'stroke-opacity="0.9"/>' % (p.pid, d, path, c))
        # Peak marks
        for d in devs_gpu:
            s = res.live_s.get(d)
            if s is None or not s.peak:
                continue
            px, py = fx(s.peak_t), fy(s.peak)
            c = dev_colour(d, devs)
            o.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="#fff" '
                     'stroke="%s" stroke-width="2"/>' % (px, py, c))
            anchor = "end" if px > ML + PW - 120 else "start"
            dx = -6 if anchor == "end" else 6
            o.append('<text x="%.1f" y="%.1f" text-anchor="%s" '
                     'font-size="11" fill="%s" paint-order="stroke" '
                     'stroke="#fff" stroke-width="3">peak %s</text>'
                     % (px + dx, py - 6 if py > top + 14 else py + 14,
                        anchor, c, xml(fmt_bytes(s.peak))))
        o.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" '
                 'stroke="#adb5bd"/>' % (ML, top, PW, PH))
        # Event lane: alloc / free / failed markers, one per 3 px column.
        lane = bot + 4
        o.append('<rect x="%d" y="%d" width="%d" height="%d" '
                 'fill="#ffffff" stroke="#dee2e6"/>'
                 % (ML, lane, PW, lane_h - 4))
        o.append('<text x="%d" y="%d" text-anchor="end" font-size="10" '
                 'fill="#868e96">events</text>' % (ML - 6, lane + 14))
        mk = []
        for (col, d, kind), x in plot.marks.get(pi, {}).items():
            if kind == "hit":
                mk.append(marker_hit(x, lane + 33, HIT_COLOUR))
                continue
            if kind == "miss":
                mk.append(marker_miss(x, lane + 33, MISS_COLOUR))
                continue
            c = FAIL_COLOUR if kind == "failed" else dev_colour(d, devs)
            if kind == "alloc":
                mk.append(marker_up(x, lane + 9, c))
            elif kind == "free":
                mk.append(marker_down(x, lane + 13, c))
            else:
                mk.append(marker_cross(x, lane + 11, c))
        o.append('<g class="markers" data-pid="%d" data-count="%d">%s</g>'
                 % (p.pid, plot.counts.get(pi, 0), "".join(mk)))
        # X tick labels
        ty = lane + lane_h + 12
        for xv in xticks:
            x = ML + INSET + xv * fx_scale
            o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" '
                     'stroke="#868e96"/>' % (x, lane + lane_h - 4, x,
                                             lane + lane_h))
            o.append('<text x="%.1f" y="%d" text-anchor="middle" '
                     'fill="#495057">%s</text>'
                     % (x, ty, fmt_tick(xv, xstep)))
        o.append("</g>")
    o.append('<text x="%.1f" y="%d" text-anchor="middle" font-size="13" '
             'fill="#343a40">time since the first process started (%s)'
             '</text>' % (ML + PW / 2, H - 12, tu))
    o.append("</svg>")
    return "\n".join(o) + "\n"


def marker_up(x, y, c):
    return ('<path d="M%.1f,%.1fl-4,6h8z" fill="%s" fill-opacity="0.85"/>'
            % (x, y - 6, c))


def marker_down(x, y, c):
    return ('<path d="M%.1f,%.1fl-4,-6h8z" fill="%s" fill-opacity="0.85"/>'
            % (x, y + 6, c))


def marker_cross(x, y, c):
    return ('<path d="M%.1f,%.1fl7,7m0,-7l-7,7" stroke="%s" '
            'stroke-width="1.8"/>' % (x - 3.5, y - 3.5, c))


def marker_hit(x, y, c):
    return '<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>' % (x, y, c)


def marker_miss(x, y, c):
    return ('<circle cx="%.1f" cy="%.1f" r="3" fill="none" stroke="%s" '
            'stroke-width="1.6"/>' % (x, y, c))
