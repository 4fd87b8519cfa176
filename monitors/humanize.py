"""Durations and numbers formatted the way kubectl and Run:ai print them."""

from __future__ import annotations


def age(seconds: float | None) -> str:
    """kubectl's HumanDuration: 45s, 12m, 3h4m, 5d, 2y."""
    if seconds is None:
        return "-"
    s = int(max(0, seconds))
    if s < 60 * 2:
        return f"{s}s"
    m = s // 60
    if m < 10:
        rem = s % 60
        return f"{m}m{rem}s" if rem else f"{m}m"
    if m < 60 * 3:
        return f"{m}m"
    h = m // 60
    if h < 8:
        rem = m % 60
        return f"{h}h{rem}m" if rem else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if d < 8:
        rem = h % 24
        return f"{d}d{rem}h" if rem else f"{d}d"
    if d < 365 * 2:
        return f"{d}d"
    y = d // 365
    if y < 8:
        rem = d % 365
        return f"{y}y{rem}d" if rem else f"{y}y"
    return f"{y}y"


def gpus(v: float | None) -> str:
    if v is None:
        return "-"
    return str(int(v)) if float(v).is_integer() else f"{v:.2f}".rstrip("0")


def percent(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}%"


def mib(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v / 1024:.1f}Gi" if v >= 1024 else f"{v:.0f}Mi"
