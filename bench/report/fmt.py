"""Formatting shared by the pages: numbers as a reader sees them ("–" for what was not
measured), and the suite's progress lines."""
import math
import sys
from datetime import datetime, timezone


def num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def say(tag, text):  # the suite's progress format (bench/lib.sh say)
    print(f"{tag:<13} {text}", file=sys.stderr)


def iso(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def f_int(v):
    return f"{v:,.0f}" if num(v) else "–"


def f_ms(v):  # three significant digits, as summary.txt prints them
    return "–" if not num(v) else f"{v:,.0f} ms" if v >= 100 else f"{v:.3g} ms"


def f_pct(v, digits=1):
    return f"{100 * v:.{digits}f}%" if num(v) else "–"


def f_bits(v):
    if not num(v):
        return "–"
    for scale, unit in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.0f} bit/s"


def f_signal(unit, v):
    if not num(v):
        return "–"
    return {"cores": f"{v:.2f} cores", "ratio": f_pct(v), "rate": f"{f_int(v)}/s", "count": f_int(v),
            "bits": f_bits(v), "pps": f"{v:.3g} packets/s"}.get(unit, f"{v:.4g}")


def f_any(v):
    if isinstance(v, dict):
        return ", ".join(f"{k}: {f_any(x)}" for k, x in v.items()) or "–"
    if isinstance(v, list):
        return ", ".join(f_any(x) for x in v) or "–"
    if isinstance(v, float):
        return f"{v:.6g}"
    return "–" if v is None else "yes" if v is True else "no" if v is False else str(v)
