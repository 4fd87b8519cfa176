"""GPU behaviour profiles: what simcluster's DCGM exporter reports for a pod's GPUs over time.

A pod chooses deterministic GPU readings with annotations (all optional):

- ``simcluster.ranks/gpu-util``: utilisation in percent (0–100), as a *profile* (below).
  Without it, utilisation follows the pod's real CPU use.
- ``simcluster.ranks/gpu-mem-mib``: framebuffer memory used in MiB, as a profile (clamped to the
  GPU's total). Without it, memory follows utilisation.
- ``simcluster.ranks/gpu-xid``: the last XID error, ``CODE`` or ``CODE@SECONDS`` (the XID appears
  that many seconds after the container started; 0 before). Without it, 0.
- ``simcluster.ranks/profile-of``: the workload (its ``training.kubeflow.org/job-name``) the others
  were written for: a copy of its pod template in another workload (`ranks debug`'s session,
  `ranks convert`'s job) runs something else, and its GPUs read as any pod's (`scripted`). Without
  it, the profiles apply to any pod that carries them.

Profile grammar (``t`` is seconds since the pod's container started)::

    profile   := part ("," part)*          one part per GPU of the pod, in order; the last part
                                           repeats for the remaining GPUs ("85,85,10": GPU 2 lags)
    part      := NUMBER                    constant, e.g. "85"
               | "noisy:" MEAN ":" AMP     MEAN ± AMP, a smooth deterministic wobble, e.g. "noisy:70:10"
               | "decay:" FROM ":" TO ":" SECONDS
                                           linear from FROM to TO over SECONDS, then TO, e.g. "decay:90:0:120"
               | "ramp:" FROM ":" TO ":" SECONDS
                                           the same shape (named for rising values), e.g. "ramp:0:95:30"
               | "stall:" LEVEL ":" AFTER  LEVEL until AFTER seconds, then 0, e.g. "stall:80:60"
               | "cycle:" HIGH ":" LOW ":" PERIOD [":" DUTY]
                                           HIGH for DUTY (default 0.5) of each PERIOD, LOW for the rest,
                                           e.g. "cycle:95:20:10" (a data-loader bound job)

Numbers are decimals (``"85"``, ``"72.5"``); no negative values, SECONDS and PERIOD > 0, DUTY in
[0, 1]. Whitespace around parts is ignored. A bad profile raises `ProfileError` with a message
naming the offending part; the exporter then falls back to its default behaviour.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any

ANNOTATION_UTIL = "simcluster.ranks/gpu-util"
ANNOTATION_MEM = "simcluster.ranks/gpu-mem-mib"
ANNOTATION_XID = "simcluster.ranks/gpu-xid"
ANNOTATION_OF = "simcluster.ranks/profile-of"
JOB_NAME = "training.kubeflow.org/job-name"


def scripted(meta: dict[str, Any]) -> bool:
    """Whether the pod (its metadata) runs the workload its profile annotations were written for."""
    of = (meta.get("annotations") or {}).get(ANNOTATION_OF)
    return of is None or of == (meta.get("labels") or {}).get(JOB_NAME)

KINDS = ("const", "noisy", "decay", "ramp", "stall", "cycle")
_ARITY = {"noisy": (2,), "decay": (3,), "ramp": (3,), "stall": (2,), "cycle": (3, 4)}


class ProfileError(ValueError):
    """A profile string that does not follow the grammar."""


@dataclass(frozen=True)
class Part:
    """One GPU's curve: `kind` and its numeric arguments."""

    kind: str
    args: tuple[float, ...]

    def value(self, t: float, seed: int = 0) -> float:
        """The value at `t` seconds after start (never negative)."""
        a = self.args
        t = max(0.0, t)
        if self.kind == "const":
            v = a[0]
        elif self.kind == "noisy":
            mean, amp = a
            v = mean + amp * _wobble(t, seed)
        elif self.kind in ("decay", "ramp"):
            start, end, secs = a
            frac = min(1.0, t / secs)
            v = start + (end - start) * frac
        elif self.kind == "stall":
            level, after = a
            v = level if t < after else 0.0
        elif self.kind == "cycle":
            high, low, period = a[:3]
            duty = a[3] if len(a) > 3 else 0.5
            v = high if (t % period) < duty * period else low
        else:  # pragma: no cover - parse() admits only known kinds
            raise ProfileError(f"unknown profile kind {self.kind!r}")
        return max(0.0, v)


@dataclass(frozen=True)
class Profile:
    """A parsed profile: one `Part` per GPU ordinal (the last repeats)."""

    text: str
    parts: tuple[Part, ...]

    def value(self, t: float, gpu: int = 0, seed: int = 0) -> float:
        """The value for the pod's `gpu`-th GPU (0-based) at `t` seconds after start."""
        part = self.parts[min(max(gpu, 0), len(self.parts) - 1)]
        return part.value(t, seed * 131 + gpu)


def _number(text: str, part: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ProfileError(f"{part!r}: {text!r} is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise ProfileError(f"{part!r}: {text!r} must be a non-negative number")
    return v


def parse_part(text: str) -> Part:
    part = text.strip()
    if not part:
        raise ProfileError("empty profile part")
    kind, sep, rest = part.partition(":")
    kind = kind.strip().lower()
    if not sep:
        return Part("const", (_number(kind, part),))
    if kind not in _ARITY:
        raise ProfileError(f"{part!r}: unknown profile kind {kind!r} (one of {', '.join(KINDS[1:])})")
    fields = rest.split(":")
    if len(fields) not in _ARITY[kind]:
        want = " or ".join(str(n) for n in _ARITY[kind])
        raise ProfileError(f"{part!r}: {kind} takes {want} numbers, got {len(fields)}")
    args = tuple(_number(f.strip(), part) for f in fields)
    if kind in ("decay", "ramp") and args[2] <= 0:
        raise ProfileError(f"{part!r}: SECONDS must be > 0")
    if kind == "cycle":
        if args[2] <= 0:
            raise ProfileError(f"{part!r}: PERIOD must be > 0")
        if len(args) > 3 and args[3] > 1:
            raise ProfileError(f"{part!r}: DUTY must be between 0 and 1")
    return Part(kind, args)


def parse_profile(text: str) -> Profile:
    """Parse a profile string (see the module docstring); raises `ProfileError`."""
    if not isinstance(text, str) or not text.strip():
        raise ProfileError("empty profile")
    if len(text) > 4096:
        raise ProfileError("profile too long")
    return Profile(text, tuple(parse_part(p) for p in text.split(",")))


def parse_xid(text: str) -> tuple[int, float]:
    """``CODE`` or ``CODE@SECONDS`` -> (code, seconds after start when it appears)."""
    code_s, sep, after_s = text.strip().partition("@")
    try:
        code = int(code_s)
    except ValueError:
        raise ProfileError(f"{text!r}: XID code {code_s!r} is not an integer") from None
    if code < 0:
        raise ProfileError(f"{text!r}: XID code must be >= 0")
    after = _number(after_s.strip(), text) if sep else 0.0
    return code, after


def xid_value(text: str, t: float) -> int:
    code, after = parse_xid(text)
    return code if t >= after else 0


def seed_of(*names: str) -> int:
    """A stable seed from names (pod uid, node, ...), the same in every process."""
    return zlib.crc32("/".join(names).encode())


def _wobble(t: float, seed: int) -> float:
    """A smooth deterministic signal in [-1, 1]: three incommensurate sines with seeded phases."""
    p1 = (seed % 997) / 997 * 2 * math.pi
    p2 = (seed % 991) / 991 * 2 * math.pi
    p3 = (seed % 983) / 983 * 2 * math.pi
    v = 0.5 * math.sin(t * 0.61 + p1) + 0.3 * math.sin(t * 1.73 + p2) + 0.2 * math.sin(t * 4.19 + p3)
    return max(-1.0, min(1.0, v))
