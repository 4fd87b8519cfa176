"""Training progress read from log lines (#15): step, loss, throughput per rank, and an ETA.

    sample = parse_line("[rank 3] step 42 loss=2.4871 lr=3.0e-04 throughput=15.2 samples/s")
    sample.step, sample.total, sample.loss, sample.throughput, sample.unit, sample.epoch

    board = ProgressBoard(compile_patterns([r"it (?P<step>\\d+) of (?P<total>\\d+)"]))  # user ones first
    board.feed("worker-3", t, line)        # True when the line gave a sample; cheap when it does not
    board.ranks["worker-3"].rate()         # steps per second; .sparkline_values() for a sparkline
    board.eta(now)                         # seconds, the slowest rank's; board.summary() for JSON

A pure module: no request, no clock of its own (the caller passes the times: a log line's time or
when it arrived). The caller strips ANSI escapes; a line holding a tqdm bar's carriage-return
updates is read at its last update. Only the first 4 KB of a line (of that last update) are read.

Built-in formats, tried in this order after the user's patterns (the first that matches wins):

- ``dict``: a JSON object or a Python dict repr, as Hugging Face's Trainer prints its logs
  (``{'loss': 1.2345, 'grad_norm': 3.2, 'learning_rate': 4.9e-05, 'epoch': 0.12}``, its final
  ``{'train_runtime': ..., 'train_samples_per_second': 12.3, ...}``) and JSON-lines loggers write
  (``{"step": 42, "loss": 0.51, "samples_per_second": 120.5}``). Evaluation keys (``eval_loss``)
  are not the training loss. An object with none of the known keys falls through to the text
  formats (a structured log whose message says ``step 42 loss=0.5``).
- ``tqdm``: tqdm bars, so PyTorch Lightning's and the Trainer's too:
  ``Epoch 3:  45%|████▌     | 450/1000 [00:41<00:50, 10.9it/s, loss=1.23, v_num=0]``; ``s/it``
  rates are turned into it/s; ``370it [01:02,  5.98it/s]`` (no total) too.
- ``keras``: Keras progress bars, ``120/1000 [==>....] - ETA: 1:02 - loss: 0.4123`` and Keras 3's
  ``120/1000 ━━━━━━━━━━━━━━━━━━━━ 1:02 62ms/step - loss: 0.4123`` (a time per step becomes it/s).
- ``epoch-batch``: PyTorch's (and Horovod's) example loop, ``Train Epoch: 1 [1280/60000 (2%)]
  Loss: 0.512`` (the step is the sample count there, the total the data set's size).
- ``text``: free text with a step key (``step``, ``global_step``, ``iter``, ``iteration``,
  ``num_updates``; ``step 42``, ``step=42``, ``Step #120``, ``iter: 42``, ``iteration 100/500000``),
  a loss key (``loss``, ``train_loss``, ``lm loss``; not ``val_loss``) and a throughput
  (``15.2 samples/s``, ``512.3 examples/sec``, ``throughput=15.2``, ``tokens_per_sec=...``, ``wps=``):
  TensorFlow's ``step 120, loss = 2.30 (512.3 examples/sec; 0.250 sec/batch)``, Horovod's
  ``Step #120	Loss: 2.301``, simcluster's demo job. It takes a line with a step and a loss, a
  throughput or a total, or with a loss and a throughput; a lone ``step 3`` in prose is not one.

The step of a per-epoch bar (Keras, Lightning) restarts every epoch: its total, and so the ETA,
are the epoch's. A NaN or infinite loss or throughput is kept as None. User patterns are regexes
with named groups ``step``, ``total``, ``loss``, ``throughput`` (at least one of them) and
optionally ``unit`` and ``epoch``; Python's ``re`` cannot be interrupted, so a pathological user
regex costs what it costs on at most 4 KB.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..user_regex import UserRegex, UserRegexError, compile_user

__all__ = ["BUILTIN", "HISTORY", "MAX_LINE", "Pattern", "ProgressBoard", "RankProgress", "Sample",
           "compile_patterns", "parse_line"]

MAX_LINE = 4096  # characters of a line looked at
HISTORY = 120  # samples kept per rank
RATE_WINDOW = 60.0  # seconds of step samples the rate is measured over (at least two samples)
STALLED_STEPS, STALLED_MIN = 10.0, 60.0  # no step for 10 steps' time (and a minute at least): stopped moving
USER_GROUPS = ("step", "total", "loss", "throughput")


@dataclass(frozen=True, slots=True)
class Sample:
    """What one log line said. At least one of step, loss and throughput is set (loss may be unset
    when the line's loss was NaN)."""

    step: int | None = None
    total: int | None = None
    loss: float | None = None
    throughput: float | None = None
    unit: str | None = None  # of the throughput: "samples/s", "it/s", "tokens/s", "/s" when not said
    epoch: float | None = None
    source: str = ""  # the pattern's name


@dataclass(frozen=True, slots=True)
class Pattern:
    """One way of reading a line: `extract(line)` runs when `precheck(line, line.lower())` holds
    (a cheap test that rules most lines out)."""

    name: str
    extract: Callable[[str], Sample | None]
    precheck: Callable[[str, str], bool] | None = None


# ---------------------------------------------------------------- number helpers

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?)"
_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def _float(s: str | None) -> float | None:
    """A finite float, or None (NaN, inf, not a number)."""
    if s is None:
        return None
    try:
        v = float(s.replace(",", ""))
    except (ValueError, OverflowError):
        return None
    return v if math.isfinite(v) else None


MAX_COUNT = 2**63 - 1  # a step or a total beyond 64 bits is no count (JSON output could not hold it)


def _int(s: str | None) -> int | None:
    """A count (a step, a total): a non-negative integer of at most 64 bits, else None."""
    if s is None:
        return None
    s = s.replace(",", "").strip()
    if s.isascii() and s.isdigit():
        v: float | None = int(s) if len(s) <= 19 else None
    else:
        v = _float(s)
    return int(v) if v is not None and 0 <= v <= MAX_COUNT else None


def _si_int(s: str | None) -> int | None:
    """tqdm's scaled counts ("1.20k")."""
    if not s:
        return None
    scale = _SI.get(s[-1])
    if scale is not None and s[-1] not in "0123456789":
        v = _float(s[:-1])
        return round(v * scale) if v is not None and 0 <= v * scale <= MAX_COUNT else None
    return _int(s)


def _sample(step: int | None = None, total: int | None = None, loss: float | None = None,
            throughput: float | None = None, unit: str | None = None, epoch: float | None = None,
            source: str = "") -> Sample | None:
    if step is None and loss is None and throughput is None:
        return None
    return Sample(step, total, loss, throughput, unit if throughput is not None else None, epoch, source)


# ---------------------------------------------------------------- dict / JSON

_PAIR = re.compile(r"""["']([\w/.\-]+)["']\s*:\s*(?:["'](""" + _NUM + r""")["']|(""" + _NUM + r"""))""",
                   re.IGNORECASE)
_STEP_KEYS = ("step", "global_step", "train/global_step", "trainer/global_step", "iteration", "iter",
              "num_updates", "steps")
_TOTAL_KEYS = ("total_steps", "max_steps", "max_iters", "total_iters", "num_steps")
_LOSS_KEYS = ("loss", "train_loss", "training_loss", "train/loss", "lm_loss", "train/loss_step")
_RATE_KEYS = {  # key: unit, in order of preference
    "samples_per_second": "samples/s", "train_samples_per_second": "samples/s", "samples_per_sec": "samples/s",
    "samples/s": "samples/s", "examples_per_sec": "examples/s", "examples_per_second": "examples/s",
    "tokens_per_sec": "tokens/s", "tokens_per_second": "tokens/s", "train_tokens_per_second": "tokens/s",
    "tokens/s": "tokens/s", "tok/s": "tokens/s", "throughput": "/s",
    "steps_per_second": "it/s", "train_steps_per_second": "it/s", "it/s": "it/s",
}


def _dict_precheck(text: str, lower: str) -> bool:
    return text.startswith("{") and (":" in text)


def _extract_dict(text: str) -> Sample | None:
    values: dict[str, str] = {}
    for m in _PAIR.finditer(text):
        key = m.group(1).lower()
        if key not in values:
            values[key] = m.group(2) if m.group(2) is not None else m.group(3)
    if not values:
        return None
    step = next((_int(values[k]) for k in _STEP_KEYS if k in values), None)
    total = next((_int(values[k]) for k in _TOTAL_KEYS if k in values), None)
    loss = next((_float(values[k]) for k in _LOSS_KEYS if k in values), None)
    rate_key = next((k for k in _RATE_KEYS if k in values), None)
    throughput = _float(values[rate_key]) if rate_key else None
    epoch = _float(values.get("epoch"))
    return _sample(step, total, loss, throughput, _RATE_KEYS[rate_key] if rate_key else None, epoch, "dict")


# ---------------------------------------------------------------- tqdm

_TQDM = re.compile(
    r"(?:(?P<pct>\d{1,3})%\|[^|]*\|\s*(?P<n>\d+(?:\.\d+)?[kMGT]?)/(?P<total>\d+(?:\.\d+)?[kMGT]?)"
    r"|(?<![\w.])(?P<n2>\d+(?:\.\d+)?[kMGT]?)it)"
    r"\s*\[(?P<inside>[^\]]*)\]")
_TQDM_RATE = re.compile(r"(?:(?P<v>" + _NUM + r"|\?)\s*(?P<si>[kMGT]?)(?P<unit>[A-Za-z_]+)/s\b"
                        r"|(?P<inv>" + _NUM + r")\s*s/(?P<iunit>[A-Za-z_]+)\b)")
_POSTFIX_LOSS = re.compile(r"(?<![\w/])(?:train_|training_|train/)?loss(?:_step)?\s*=\s*(" + _NUM + ")",
                           re.IGNORECASE)
_EPOCH = re.compile(r"(?<![\w/])epoch\b\s*[:=#]?\s*(" + _NUM + ")", re.IGNORECASE)


def _tqdm_precheck(text: str, lower: str) -> bool:
    return "%|" in text or "it [" in text


def _extract_tqdm(text: str) -> Sample | None:
    m = _TQDM.search(text)
    if m is None:
        return None
    step = _si_int(m.group("n") or m.group("n2"))
    total = _si_int(m.group("total"))
    inside = m.group("inside")
    throughput: float | None = None
    unit: str | None = None
    r = _TQDM_RATE.search(inside)
    if r is not None:
        if r.group("unit"):
            v = None if r.group("v") == "?" else _float(r.group("v"))
            throughput = v * _SI[r.group("si")] if v is not None else None
            unit = r.group("unit") + "/s"
        else:
            v = _float(r.group("inv"))
            throughput = 1.0 / v if v else None
            unit = r.group("iunit") + "/s"
    lm = _POSTFIX_LOSS.search(inside)
    loss = _float(lm.group(1)) if lm else None
    em = _EPOCH.search(text, 0, m.start())
    return _sample(step, total, loss, throughput, unit, _float(em.group(1)) if em else None, "tqdm")


# ---------------------------------------------------------------- Keras

_KERAS = re.compile(r"^\s*(\d+)/(\d+|Unknown)\s*(?:\[[=>.]*\]|━+|\|[^|]*\|)")
_KERAS_METRIC = re.compile(r"\s-\s(?:(?:train_)?loss)\s*:\s*(" + _NUM + ")", re.IGNORECASE)
_KERAS_TIME = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(us|ms|s)/(step|sample)\b")
_TIME_SCALE = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def _keras_precheck(text: str, lower: str) -> bool:
    return "/" in text and ("[" in text or "━" in text or "|" in text) and text.lstrip()[:1].isdigit()


def _extract_keras(text: str) -> Sample | None:
    m = _KERAS.match(text)
    if m is None:
        return None
    rest = text[m.end():]
    lm = _KERAS_METRIC.search(rest)
    loss = _float(lm.group(1)) if lm else None
    throughput: float | None = None
    unit: str | None = None
    tm = _KERAS_TIME.search(rest)
    if tm is not None:
        per = float(tm.group(1)) * _TIME_SCALE[tm.group(2)]
        if per > 0:
            throughput = 1.0 / per
            unit = "it/s" if tm.group(3) == "step" else "samples/s"
    return _sample(_int(m.group(1)), _int(m.group(2)), loss, throughput, unit, None, "keras")


# ---------------------------------------------------------------- PyTorch example loop

_EPOCH_BATCH = re.compile(r"epoch\s*:?\s*(\d+)\s*\[\s*(\d+)\s*/\s*(\d+)", re.IGNORECASE)
_LOSS = re.compile(r"(?<![\w/])(?:(?:lm|train|training)[ _])?loss\b\s*[:=]?\s*(" + _NUM + r")(?![\w.])",
                   re.IGNORECASE)


def _epoch_batch_precheck(text: str, lower: str) -> bool:
    return "epoch" in lower and "[" in text


def _extract_epoch_batch(text: str) -> Sample | None:
    m = _EPOCH_BATCH.search(text)
    if m is None:
        return None
    lm = _LOSS.search(text, m.end())
    return _sample(_int(m.group(2)), _int(m.group(3)), _float(lm.group(1)) if lm else None, None, None,
                   float(m.group(1)), "epoch-batch")


# ---------------------------------------------------------------- free text

_STEP = re.compile(r"(?<![\w/])(?:global_step|step|iteration|iter|num_updates)\s*(?:#|:|=)?\s*(\d+)"
                   r"(?:\s*/\s*(\d+))?(?![\w.])", re.IGNORECASE)
_UNITS = {"samples": "samples", "sample": "samples", "examples": "examples", "example": "examples",
          "tokens": "tokens", "token": "tokens", "tok": "tokens", "it": "it", "its": "it", "steps": "it",
          "step": "it", "images": "images", "img": "images", "imgs": "images", "seqs": "sequences",
          "seq": "sequences", "sequences": "sequences", "words": "words", "batches": "batches"}
_RATE_UNIT = re.compile(r"(?<![\w.])(" + _NUM + r")\s*(" + "|".join(sorted(_UNITS, key=len, reverse=True))
                        + r")\s*/\s*s(?:ec(?:ond)?)?\b", re.IGNORECASE)
_RATE_KEY = re.compile(r"(?<![\w/])(throughput|samples_per_sec(?:ond)?|examples_per_sec(?:ond)?|"
                       r"tokens_per_sec(?:ond)?|tok_per_sec|wps|tps|ups)\s*[:=]\s*(" + _NUM + r")(?![\w.])",
                       re.IGNORECASE)
_KEY_UNITS = {"samples": "samples/s", "examples": "examples/s", "tokens": "tokens/s", "tok": "tokens/s",
              "wps": "words/s", "tps": "tokens/s", "ups": "it/s", "throughput": "/s"}


def _text_precheck(text: str, lower: str) -> bool:
    return "step" in lower or "iter" in lower or "loss" in lower or "num_updates" in lower


def _extract_text(text: str) -> Sample | None:
    sm = _STEP.search(text)
    lm = _LOSS.search(text)
    throughput: float | None = None
    unit: str | None = None
    rm = _RATE_UNIT.search(text)
    if rm is not None:
        throughput = _float(rm.group(1))
        unit = _UNITS[rm.group(2).lower()] + "/s"
    else:
        km = _RATE_KEY.search(text)
        if km is not None:
            throughput = _float(km.group(2))
            key = km.group(1).lower()
            unit = next((u for k, u in _KEY_UNITS.items() if key.startswith(k)), "/s")
    has_rate = rm is not None or unit is not None
    step = _int(sm.group(1)) if sm else None
    total = _int(sm.group(2)) if sm else None
    if not ((step is not None and (lm is not None or has_rate or total is not None))
            or (lm is not None and has_rate)):
        return None
    em = _EPOCH.search(text)
    return _sample(step, total, _float(lm.group(1)) if lm else None, throughput, unit,
                   _float(em.group(1)) if em else None, "text")


BUILTIN: tuple[Pattern, ...] = (
    Pattern("dict", _extract_dict, _dict_precheck),
    Pattern("tqdm", _extract_tqdm, _tqdm_precheck),
    Pattern("keras", _extract_keras, _keras_precheck),
    Pattern("epoch-batch", _extract_epoch_batch, _epoch_batch_precheck),
    Pattern("text", _extract_text, _text_precheck),
)


# ---------------------------------------------------------------- user patterns

def _user_extractor(rx: UserRegex) -> Callable[[str], Sample | None]:
    groups = rx.groupindex

    def extract(text: str) -> Sample | None:
        m = rx.search(text)
        if m is None:
            return None
        g = m.groupdict()
        throughput = _float(g.get("throughput")) if "throughput" in groups else None
        unit = (g.get("unit") or "").strip() or "/s"
        if unit != "/s" and not unit.endswith("/s"):
            unit += "/s"
        return _sample(_int(g.get("step")), _int(g.get("total")), _float(g.get("loss")), throughput, unit,
                       _float(g.get("epoch")), f"user:{rx.pattern}")

    return extract


def compile_patterns(regexes: Iterable[str]) -> list[Pattern]:
    """The user's regexes as patterns (to try before `BUILTIN`). Each names at least one of the groups
    step, total, loss, throughput (unit and epoch may be named too); ValueError, naming the regex, for
    one that does not compile or names none of them."""
    out: list[Pattern] = []
    for source in regexes:
        try:  # (without backtracking: every log line goes through it)
            rx = compile_user(source)
        except UserRegexError as e:
            raise ValueError(f"bad progress pattern {source!r}: {e}") from None
        if not any(g in rx.groupindex for g in USER_GROUPS):
            raise ValueError(f"bad progress pattern {source!r}: it names none of the groups "
                             f"{', '.join(USER_GROUPS)}, as in (?P<step>\\d+)")
        out.append(Pattern(f"user:{source}", _user_extractor(rx)))
    return out


# ---------------------------------------------------------------- parsing

def _clip(text: str) -> str:
    if "\r" in text:  # tqdm's updates without a newline: the last one is the line's state
        text = text.rstrip("\r\n")
        text = text[text.rfind("\r") + 1:]
    return text[:MAX_LINE].strip()


def parse_line(text: str, patterns: Sequence[Pattern] = BUILTIN) -> Sample | None:
    """The progress one log line reports, by the first of `patterns` that reads it; None when none
    does. Never raises."""
    try:
        line = _clip(text)
        if not line:
            return None
        lower = line.lower()
        for p in patterns:
            if p.precheck is not None and not p.precheck(line, lower):
                continue
            try:
                s = p.extract(line)
            except Exception:  # a pattern that fails on a line reads nothing there
                continue
            if s is not None:
                return s
    except Exception:
        return None
    return None


# ---------------------------------------------------------------- per rank, per workload

class Point(NamedTuple):
    t: float
    step: int | None
    loss: float | None
    throughput: float | None


class RankProgress:
    """One rank's samples: the last `maxlen` of them, and the latest value of each field (a line that
    does not give the loss leaves the previous loss as the latest)."""

    __slots__ = ("epoch", "history", "last_step_t", "loss", "step", "throughput", "total", "unit")

    def __init__(self, maxlen: int = HISTORY) -> None:
        self.history: deque[Point] = deque(maxlen=maxlen)
        self.step: int | None = None
        self.total: int | None = None
        self.loss: float | None = None
        self.throughput: float | None = None
        self.unit: str | None = None
        self.epoch: float | None = None
        self.last_step_t: float | None = None  # when the latest step was read

    def add(self, t: float, sample: Sample) -> None:
        self.history.append(Point(t, sample.step, sample.loss, sample.throughput))
        if sample.step is not None:
            self.step = sample.step
            self.last_step_t = t
            if sample.total is not None:
                self.total = sample.total
        if sample.loss is not None:
            self.loss = sample.loss
        if sample.throughput is not None:
            self.throughput = sample.throughput
            self.unit = sample.unit
        if sample.epoch is not None:
            self.epoch = sample.epoch

    def rate(self, window: float = RATE_WINDOW) -> float | None:
        """Steps per second: over the step samples of the last `window` seconds (at least the last two)
        since the step last went back (a new epoch's bar, a restart). Without two such samples, a
        throughput in it/s (tqdm's own rate); else None."""
        pts = [(p.t, p.step) for p in self.history if p.step is not None]
        start = len(pts) - 1
        while start > 0 and pts[start - 1][1] <= pts[start][1] and pts[start - 1][0] <= pts[start][0]:
            start -= 1
        run = pts[max(start, 0):]
        if len(run) >= 2:
            t_end, s_end = run[-1]
            first = len(run) - 2
            while first > 0 and t_end - run[first - 1][0] <= window:
                first -= 1
            t0, s0 = run[first]
            if t_end > t0 and s_end >= s0:
                return (s_end - s0) / (t_end - t0)
        if self.unit == "it/s" and self.throughput is not None and self.throughput > 0:
            return self.throughput
        return None

    def sparkline_values(self) -> list[float]:
        """The loss history, or the throughput history when no line gave a loss."""
        losses = [p.loss for p in self.history if p.loss is not None]
        if losses:
            return losses
        return [p.throughput for p in self.history if p.throughput is not None]


class ProgressBoard:
    """The progress of one workload's ranks, fed its log lines. `patterns` (the user's, from
    `compile_patterns`) are tried before the built-in ones."""

    def __init__(self, patterns: Sequence[Pattern] = (), maxlen: int = HISTORY) -> None:
        self.patterns: tuple[Pattern, ...] = (*patterns, *BUILTIN)
        self.maxlen = maxlen
        self.ranks: dict[str, RankProgress] = {}

    def feed(self, label: str, t: float, text: str) -> bool:
        """Read one log line of rank `label` at time `t`; True when it gave a sample."""
        sample = parse_line(text, self.patterns)
        if sample is None:
            return False
        rank = self.ranks.get(label)
        if rank is None:
            rank = self.ranks[label] = RankProgress(self.maxlen)
        rank.add(t, sample)
        return True

    def total(self) -> int | None:
        """The largest total any rank reported (ranks of one job run the same steps; often only rank 0
        says how many)."""
        totals = [r.total for r in self.ranks.values() if r.total is not None]
        return max(totals) if totals else None

    def eta(self, now: float) -> float | None:
        """Seconds until the slowest rank reaches the total: per rank with a step and a rate, what is
        left at its rate, counted from its latest step, less the time since. None without a total or
        without any rank's rate, or when a rank short of the total stopped moving (its rate 0, or no step
        for `STALLED_STEPS` of its steps' time and at least `STALLED_MIN` s: a hung job has no ETA, where
        its last rate would count down for days). A per-epoch bar's total makes it the epoch's ETA."""
        board_total = self.total()
        worst: float | None = None
        for r in self.ranks.values():
            total = r.total if r.total is not None else board_total
            if total is None or r.step is None or r.last_step_t is None:
                continue
            left = total - r.step
            if left <= 0:
                secs = 0.0
            else:
                rate = r.rate()
                if rate is None:  # not measurable (yet): the other ranks decide
                    continue
                since = max(0.0, now - r.last_step_t)
                if rate <= 0 or since > max(STALLED_MIN, STALLED_STEPS / rate):
                    return None  # not moving (no step for many of its steps' time: hung): no finish in sight
                secs = max(0.0, left / rate - since)
            worst = secs if worst is None else max(worst, secs)
        return worst

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per rank, for JSON: {label: {"step", "loss", "throughput", "unit", "rate"}}."""
        return {label: {"step": r.step, "loss": r.loss, "throughput": r.throughput, "unit": r.unit,
                        "rate": r.rate()} for label, r in self.ranks.items()}
