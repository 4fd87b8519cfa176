"""`ranks logs WORKLOAD`: the merged logs of every rank, in time order, with a prefix per rank.

Text output: `[worker-3] line`, the prefix aligned and coloured per rank when stdout is a
terminal (not with NO_COLOR or --no-color); the line's own SGR colours are kept as our own
codes, every other control or escape sequence is removed (monitors.logs.terminal_text).
JSON output: one object per line `{ts, rank, label, role, replica_index, pod, container, stream,
line}`, in time order (`ts` is RFC3339 with 9 fraction digits, so it also sorts as text).

`--first-failure` names the rank that terminated first with a non-zero exit and prints its last
lines (the previous instance if the container restarted since).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from monitors.connection import ClusterConfig, ExitCode
from monitors.humanize import plural
from monitors.sanitize import clean

from .errors import error
from .loading import load_recording, locate
from .options import PROJECT, command, global_options, group_project, merge_globals, workload_argument
from .printers import colour_enabled
from .running import INTERRUPT_GRACE, run

if TYPE_CHECKING:
    from monitors.flight_recorder import FlightRecorder, Recording
    from monitors.logs.engine import LogEngine
    from monitors.logs.filters import LineFilter
    from monitors.logs.first_failure import FailureReport
    from monitors.logs.lines import LogLine
    from monitors.model_views import WorkloadView
    from monitors.monitor import Monitor


@command("logs", reads_only=True)
@workload_argument
@PROJECT
@click.option("-f", "--follow", is_flag=True, help="Keep following: new lines, restarted and late pods.")
@click.option("--since", metavar="DURATION", default=None, help="Only lines newer than this (30s, 10m, 1h).")
@click.option("--tail", type=click.IntRange(0, 2**63 - 1), default=None, metavar="N",
              help="Only the newest N lines of the merged history (taken before --grep/--exclude).")
@click.option("--rank", "ranks", multiple=True, metavar="R[,R...]",
              help="Only these ranks: labels (worker-3, launcher) or global rank numbers.")
@click.option("--role", "roles", multiple=True, metavar="ROLE[,ROLE...]", help="Only these roles (worker, master...).")
@click.option("--grep", metavar="REGEX", default=None, help="Only lines matching REGEX (highlighted).")
@click.option("--exclude", metavar="REGEX", default=None, help="Drop lines matching REGEX.")
@click.option("--timestamps", is_flag=True, help="Show each line's timestamp.")
@click.option("--no-color", "--no-colour", "no_color", is_flag=True, help="No colour (also: NO_COLOR set).")
@click.option("--previous", is_flag=True, help="The previous (crashed) instance of each container.")
@click.option("--first-failure", "first_failure", is_flag=True,
              help="Name the rank that failed first and print its last lines (--tail, default 20).")
@click.option("--collapse", is_flag=True, help="Show identical lines of several ranks once, as 'xN ranks'.")
@click.option("--max-streams", type=click.IntRange(1, 100_000), default=256, show_default=True,
              help="At most this many log streams open at once.")
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Output format (json: one object per line).")
@global_options
@click.pass_context
def logs_command(ctx: click.Context, /, workload: str, project: str | None, **kw: Any) -> None:
    """Merged logs of every rank of WORKLOAD, in time order, each line prefixed with its rank.

    WORKLOAD is a name, or KIND/NAME (pytorchjob/mnist) when names clash.
    """
    opts = merge_globals(ctx, kw)
    sys.exit(run_logs(opts, workload, group_project(ctx, project), **kw))


# prefix colours, one per rank in rank order (ANSI 16-colour codes readable on dark and light terminals)
PALETTE = ("36", "33", "35", "32", "34", "31", "96", "93", "95", "92", "94", "91")
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(h|ms|m|s|us|µs|ns)")  # (ASCII digits only, as Go)
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(text: str) -> float:
    """A Go duration (`10m`, `1h30m`, `45s`) in seconds; ValueError when malformed."""
    from monitors.sanitize import shown

    s = text.strip()
    if not s:
        raise ValueError(f"{shown(text)} is not a duration: it is empty (use e.g. 30s, 10m, 1h30m)")
    pos = 0
    total = 0.0
    for m in _DURATION.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(s):
        raise ValueError(f"{shown(text)} is not a duration (use e.g. 30s, 10m, 1h30m)")
    from .options import in_range

    return in_range(text, total)


class Printer:
    """Writes released lines to stdout (text or JSON), notices to stderr."""

    def __init__(self, output: str, *, colour: bool, timestamps: bool, flt: LineFilter, follow: bool) -> None:
        import asyncio

        self.output = output
        self.colour = colour
        self.timestamps = timestamps
        self.filter = flt
        self.follow = follow
        self.width = 0
        self.colours: dict[str, str] = {}
        self.multi: set[str] = set()  # pods with several containers: the prefix names the container
        self._names: dict[tuple[str, str, str], str] = {}  # (label, pod, container) -> the prefix's name
        self.broken = asyncio.Event()
        self.printed = 0
        self.dim = ""  # the collapsed lines' "(xN ranks)"
        if colour:
            from monitors.logs.terminal_text import style_to_sgr

            self.dim = style_to_sgr("dim")

    def set_ranks(self, wl: WorkloadView, containers: dict[str, tuple[str, ...]]) -> None:
        for r in wl.ranks:
            if r.label not in self.colours:
                self.colours[r.label] = PALETTE[len(self.colours) % len(PALETTE)]
            names = containers.get(r.pod, ())
            if len(names) > 1:
                self.multi.add(r.pod)
                self._names.clear()
            for c in names or ("",):
                self.width = max(self.width, len(self._name(r.label, r.pod, c)))

    def _name(self, label: str, pod: str, container: str) -> str:
        key = (label, pod, container)
        name = self._names.get(key)
        if name is None:  # (a rank's label is cluster text, its role a label's value: printed without controls)
            name = self._names[key] = clean(f"{label}/{container}" if pod in self.multi and container else label,
                                            limit=80)
        return name

    def lines(self, lines: list[LogLine]) -> None:
        if self.broken.is_set():
            return
        flt = self.filter
        out: list[str] = []
        if self.output == "json":
            import orjson

            from monitors.sanitize import json_safe

            for line in lines:
                if line.kind != "line" or not flt.matches(line):
                    continue
                obj: dict[str, Any] = {
                    "ts": line.iso, "rank": line.rank, "label": line.label, "role": line.role,
                    "replica_index": line.replica_index, "pod": line.pod, "container": line.container,
                    "stream": line.stream, "line": line.text,
                }
                if line.ranks:
                    obj["ranks"] = list(line.ranks)
                out.append(json_safe(orjson.dumps(obj).decode()))
        else:
            for line in lines:
                if line.kind != "line" or not flt.matches(line):
                    continue
                out.append(self._text(line))
        if not out:
            return
        self.printed += len(out)
        self._write("\n".join(out) + "\n")

    def _text(self, line: LogLine) -> str:
        name = self._name(line.label, line.pod, line.container)
        tag = f"[{name}]"
        pad = " " * max(0, self.width + 2 - len(tag))
        ts = line.iso + " " if self.timestamps else ""
        safe = line.safe
        suffix = f"  (x{line.count} ranks)" if line.ranks else ""
        if self.colour:
            code = self.colours.get(line.label) or PALETTE[hash(line.label) % len(PALETTE)]
            body = safe.to_ansi(self.filter.highlights(line))
            if suffix:
                suffix = f"{self.dim}{suffix}\x1b[0m"
            return f"{ts}\x1b[{code}m{tag}\x1b[0m{pad} {body}{suffix}"
        return f"{ts}{tag}{pad} {safe.text}{suffix}"

    def _write(self, text: str) -> None:
        try:
            sys.stdout.write(text)
            if self.follow:
                sys.stdout.flush()
        except BrokenPipeError:
            self._broken()
        except ValueError:  # stdout closed
            self._broken()

    def _broken(self) -> None:
        self.broken.set()
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass

    @staticmethod
    def notice(message: str) -> None:
        print(f"ranks: note: {clean(message, limit=2000)}", file=sys.stderr, flush=True)


def run_logs(opts: dict[str, Any], ref: str, project: str | None, *, follow: bool, since: str | None,
             tail: int | None, ranks: tuple[str, ...], roles: tuple[str, ...], grep: str | None,
             exclude: str | None, timestamps: bool, no_color: bool, previous: bool, output: str,
             first_failure: bool, collapse: bool, max_streams: int) -> int:
    import asyncio

    from monitors.logs.engine import LogEngine, LogOptions, failure_summary
    from monitors.logs.filters import FilterError, LineFilter
    from monitors.logs.first_failure import first_failure_report
    from monitors.monitor import Monitor
    from sessions.locate import pick_workload

    for flag, values in (("--rank", ranks), ("--role", roles)):
        if any(not part.strip() for value in values for part in value.split(",")):
            # ('' would name no rank, and a filter of none reads every rank: not what was asked)
            example = "worker-3, launcher or 0" if flag == "--rank" else "worker or master"
            return error(f"{flag}: an empty name (give one or more, separated by commas: {example})", ExitCode.USAGE)
    try:
        flt = LineFilter.build(ranks=ranks, roles=roles, include=grep, exclude=exclude)
    except FilterError as exc:
        return error(str(exc), ExitCode.USAGE)
    since_seconds = None
    if since is not None:  # (an empty --since is an error, not "no limit")
        try:
            secs = parse_duration(since)
        except ValueError as exc:
            return error(f"--since: {exc}", ExitCode.USAGE)
        if secs <= 0:
            return error("--since must be greater than 0", ExitCode.USAGE)
        since_seconds = max(1, int(secs + 0.999))
    if previous and follow:
        return error("--previous reads finished instances and cannot be used with -f/--follow", ExitCode.USAGE)
    colour = colour_enabled() and not no_color and output == "text"
    give_up = opts.get("request_timeout") or 30.0
    options = LogOptions(follow=follow, since_seconds=since_seconds, tail=tail, previous=previous, filter=flt,
                         collapse=collapse, max_streams=max_streams, failure_notices=False,
                         give_up_after=float(give_up), history_timeout=opts.get("request_timeout") or None)

    async def body(cfg: ClusterConfig) -> int:
        # the workload: in -p's project, else the context's namespace, else the one project that has it
        monitor, wl = await locate(cfg, opts, ref, project, events=first_failure and not follow, alone=True)
        if follow:  # the follow needs watches: the same namespace, listed and watched
            await monitor.stop()
            monitor = Monitor(cfg, events=False, nodes=False, scope=(wl.namespace,))
        engine: LogEngine | None = None
        recorder: FlightRecorder | None = None
        try:
            if follow:
                await monitor.start()
                await monitor.wait_synced(timeout=120)
                wl = pick_workload(monitor.model.workloads.values(), f"{wl.kind}/{wl.name}")
            if first_failure:
                report = await first_failure_report(monitor.client, wl, lines=tail if tail is not None else 20)
                recording, story = None, []
                if report is None and wl.status == "Failed":  # the pods are gone: a recording?
                    from monitors.diagnostics.postmortem import what_happened
                    from monitors.flight_store import store_for

                    recording = await load_recording(store_for(cfg), wl)
                    story = what_happened(wl, monitor.model.events_for(wl, 10_000), recording)
                _print_failure(wl, report, output, colour, recording, story)
                return ExitCode.OK
            unknown = flt.unknown_ranks(wl.ranks)
            if unknown and not follow and not any(flt.wants_rank(r) for r in wl.ranks):
                # none of the ranks asked for exists, and no follow waits for one: as `ranks exec`
                names = ", ".join(f'"{clean(n, limit=80)}"' for n in unknown)
                have = ", ".join(clean(r.label) for r in wl.ranks) or "none"
                return error(f"no rank {names} in {wl.kind.lower()}/{clean(wl.name)} (ranks: {have})",
                             ExitCode.NOT_FOUND)
            for name in unknown:
                Printer.notice(f'no rank "{name}" in {wl.kind.lower()}/{wl.name} (yet)')
            printer = Printer(output, colour=colour, timestamps=timestamps, flt=flt, follow=follow)
            printer.set_ranks(wl, _containers(monitor, wl))
            engine = LogEngine(monitor.client, wl.key, monitor.model, monitor=monitor, options=options)
            engine.subscribe(printer.lines)
            engine.on_notice(Printer.notice)
            if follow:
                monitor.subscribe(lambda _d: _refresh_ranks(engine, printer, monitor))
                recorder = _flight_recorder(cfg, monitor, engine)
            await engine.start()
            done = asyncio.ensure_future(engine.wait())
            broken = asyncio.ensure_future(printer.broken.wait())
            fatal = asyncio.ensure_future(engine.fatal.wait())
            try:
                await asyncio.wait({done, broken, fatal}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for t in (done, broken, fatal):
                    t.cancel()
            if engine.fatal_failure is not None and not printer.broken.is_set():
                await engine.stop()  # what was read is printed first
                f = engine.fatal_failure
                return error(clean(f.one_line(), limit=500), f.code)
            gone = _gone_note(engine, wl, flt, cfg) if not printer.broken.is_set() else None
            if gone:
                Printer.notice(gone)
            elif not follow and not engine.streams:
                Printer.notice(f"{wl.kind.lower()}/{wl.name} has no started pods to read logs from")
            if engine.failures and not printer.broken.is_set():
                message, code = failure_summary(engine.failures)
                return error(clean(message, limit=500), code)
            if not follow and not engine.connected:
                return ExitCode.UNREACHABLE
            return ExitCode.OK
        finally:
            if recorder is not None:
                await recorder.drain()
            if engine is not None:
                await engine.stop()
            await monitor.stop()

    return run(opts, body, interrupt_grace=INTERRUPT_GRACE)


def _flight_recorder(cfg: ClusterConfig, monitor: Monitor, engine: LogEngine) -> FlightRecorder:
    """While following, each rank that fails is written down with its last lines (as the engine
    received them): the record outlives the pods (`monitors.flight_recorder`)."""
    from monitors.flight_recorder import FlightRecorder, store_for

    recorder = FlightRecorder(store_for(cfg), monitor.client,
                              lambda _key, label: [ln.text for ln in engine.last_lines(label, 50)],
                              on_refused=Printer.notice)
    recorder.prime(monitor.model)
    recorder.watch(monitor.model)
    return recorder


def _gone_note(engine: LogEngine, started: WorkloadView, flt: LineFilter, cfg: ClusterConfig) -> str | None:
    """A finished workload with fewer ranks read (or still there) than it has: their pods were
    deleted before their logs could be read (the operator's cleanPodPolicy; every pod of a job
    that reached its backoff limit). Said, with where to look next, rather than nothing."""
    wl = engine.workload or started
    if wl.status not in ("Succeeded", "Failed") or flt.ranks or flt.roles:
        return None  # (running: they may come; a filter asked for some ranks only)
    seen = {s.origin.label for s in [*engine.streams.values(), *engine.queued]} | {r.label for r in wl.ranks}
    gone = wl.ranks_total - len(seen)
    if gone <= 0:
        return None
    what = f"{wl.kind.lower()}/{wl.name}"
    note = (f"{gone} of {wl.ranks_total} ranks of {what} ({wl.status.lower()}) had no pod left: "
            "deleted before their logs could be read")
    if wl.status == "Failed":
        from sessions.own_command import ranks_command

        note += (f"; what is known of the failure: {ranks_command(cfg) or 'ranks'} logs "
                 f"{shlex.quote(clean(wl.name))} -p {shlex.quote(clean(wl.project or wl.namespace))} --first-failure")
    return note


def _containers(monitor: Monitor, wl: WorkloadView) -> dict[str, tuple[str, ...]]:
    out = {}
    for r in wl.ranks:
        rec = monitor.model.pods.get((r.namespace, r.pod))
        out[r.pod] = rec.containers if rec is not None else ()
    return out


def _refresh_ranks(engine: LogEngine, printer: Printer, monitor: Monitor) -> None:
    wl = engine.workload
    if wl is not None:
        printer.set_ranks(wl, _containers(monitor, wl))


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    from monitors.logs.lines import format_ts

    text = format_ts(int(at * 1e9))
    return text[:19] + "Z" if text.endswith(".000000000Z") else text


def _print_failure(wl: WorkloadView, report: FailureReport | None, output: str, colour: bool,
                   recording: Recording | None = None, story: list[str] | None = None) -> None:
    recorded = recording.first() if recording is not None else None
    if output == "json":
        doc: dict[str, Any] = {"workload": wl.name, "namespace": wl.namespace, "kind": wl.kind, "failure": None}
        if report is not None:
            doc["failure"] = report.as_json()
            lines: list[dict[str, str | None]] = [{"ts": ln.iso, "line": ln.text} for ln in report.lines]
            if not lines and report.failure.message:
                lines = [{"ts": None, "line": t} for t in report.failure.message.splitlines()]
                doc["failure"]["source"] = "termination message"
            doc["lines"] = lines
        elif recorded is not None:
            doc["failure"] = recorded.to_json()
            doc["lines"] = [{"ts": None, "line": t} for t in recorded.lines]
        if story:
            doc["what_happened"] = story
        from .printers import emit_structured

        emit_structured(doc, "json")
        return
    if report is None and recorded is not None:
        from .printers import print_failure

        print_failure(recorded, time.time())
        for line in story or ():
            sys.stdout.write(f"  - {clean(line, limit=500)}\n")
        return
    if report is None:
        ref = f"{wl.kind.lower()}/{clean(wl.name)}"
        if story:
            pods = "its pods are being deleted" if wl.ranks else "its pods are gone"
            sys.stdout.write(f"{ref} {wl.status.lower()}, and {pods}; no ranks process recorded a failing rank. "
                             "What is left:\n")
            for line in story:
                sys.stdout.write(f"  - {clean(line, limit=500)}\n")
            return
        if wl.status == "Failed":  # (failed, yet no rank shows a failure of its own: say what the job says)
            sys.stdout.write(f"{ref} failed" + (f": {clean(wl.reason, limit=500)}" if wl.reason else "")
                             + "; none of its ranks shows a failure of its own (see `ranks why`).\n")
            return
        sys.stdout.write(f"No rank of {ref} has failed.\n")
        return
    f = report.failure
    rank = f"rank {f.rank}" if f.rank is not None else "no global rank"
    rows = [
        ("First failure", f"{f.label} (role {f.role}, {rank})"),
        ("Pod", f.pod),
        ("Container", f.container),
        ("Exit code", f"{f.exit_code} ({f.reason})" if f.reason else str(f.exit_code)),
        ("Finished", _when(f.at)),
    ]
    if f.message:
        rows.append(("Message", f.message))
    out = [f"{k + ':':<15}{clean(v)}" for k, v in rows]
    which = "previous instance" if report.previous else "instance that failed"
    if report.lines:
        out.append(f"\nLast {plural(len(report.lines), 'line')} of the {which}:")
        bold = "\x1b[1m" if colour else ""
        reset = "\x1b[0m" if colour else ""
        for ln in report.lines:
            body = ln.safe.to_ansi() if colour else ln.text
            out.append(f"{bold}[{clean(f.label)}]{reset} {body}")
    elif f.message:  # the log cannot be read: the termination message (FallbackToLogsOnError) holds its end
        out.append(f"\n({clean(report.note)}; its termination message:)")
        out.extend(f"[{clean(f.label)}] {clean(t, limit=1000)}" for t in f.message.splitlines())
    else:
        out.append(f"\n({clean(report.note)})")
    sys.stdout.write("\n".join(out) + "\n")
