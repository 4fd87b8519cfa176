"""The dashboard's actions (#7): shell, exec on all ranks, delete, suspend/resume, convert, new
session. `DashboardActions`, an object the app holds (`RanksApp.actions`; screens reach it through
`tui.dashboard.Dashboard.actions`): the work runs on the data loop (sessions/*, no UI), results
come back as futures awaited in the app's workers; read-only mode refuses each with the reason."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from rich.text import Text
from textual.app import App, SuspendNotSupported
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.worker import Worker

from monitors.connection import ClusterConfig, ConnectionProblem, ExitCode
from monitors.dataloop import DataLoop
from monitors.diagnostics.holders import GpuFit
from monitors.humanize import plural
from monitors.model_views import RankView, WorkloadView
from monitors.sanitize import clean
from sessions import convert, debug, launch_env, lifecycle
from sessions.action_log import report
from sessions.errors import SessionError
from sessions.exec_all import run_on_ranks
from sessions.exec_bridge import ExecError, ExecOutcome
from sessions.history_store import store_for
from sessions.launch_env import Exports
from sessions.launches import Launch
from sessions.manifests import SubmitSpec, spec_problems
from sessions.session_history import keep_before_losing, loss_note, record_exec, session_launches
from sessions.shell import (
    NotYet,
    explain_end,
    not_running_reason,
    pick_rank,
    run_shell_session,
    shell_target,
)
from sessions.submit import submit
from sessions.terminal import LocalTerminal

from .dashboard import ActionsHost, WorkloadKey
from .screens.dialogs import (
    ConfirmScreen,
    Conversion,
    ConvertScreen,
    ExecScreen,
    NewSessionScreen,
    PromptScreen,
)
from .store import ViewStore

if TYPE_CHECKING:
    from monitors.kube import KubeClient

P = ParamSpec("P")
R = TypeVar("R")


def in_worker(group: str, *, exclusive: bool = False) -> Callable[
        [Callable[Concatenate[DashboardActions, P], Coroutine[Any, Any, None]]],
        Callable[Concatenate[DashboardActions, P], Worker[None]]]:
    """The method runs in a worker of the app (Textual's `work`, for an object that is not a node)."""

    def decorate(method: Callable[Concatenate[DashboardActions, P], Coroutine[Any, Any, None]]
                 ) -> Callable[Concatenate[DashboardActions, P], Worker[None]]:
        def start(self: DashboardActions, /, *args: P.args, **kwargs: P.kwargs) -> Worker[None]:
            return self.app.run_worker(functools.partial(method, self, *args, **kwargs), name=method.__name__,
                                       group=group, exclusive=exclusive)

        return start

    return decorate


def _message(exc: BaseException) -> str:
    return clean(getattr(exc, "message", None) or str(exc) or type(exc).__name__, limit=300)


class DashboardActions:
    """The actions of a dashboard: `app` is Textual's side of it (dialogs, notifications, workers,
    suspending for a shell), `host` the dashboard's (its data loop, store and navigation); `RanksApp`
    is both."""

    def __init__(self, app: App[Any], host: ActionsHost) -> None:
        self.app = app
        self.host = host
        self.terminal: Callable[[], LocalTerminal] = LocalTerminal  # the shell's (stdin and stdout)
        self.shell_open = False
        self._after_shell: list[Callable[[], None]] = []

    # -- what the actions use of the dashboard -------------------------------------------------------------
    @property
    def data(self) -> DataLoop:
        return self.host.data

    @property
    def cfg(self) -> ClusterConfig:
        return self.host.cfg

    @property
    def store(self) -> ViewStore:
        return self.host.store

    @property
    def me(self) -> str:
        return self.host.me

    @property
    def paste_command(self) -> str:
        return self.host.paste_command

    @property
    def read_only(self) -> bool:
        return self.host.read_only

    @property
    def read_only_why(self) -> str:
        return self.host.read_only_why

    def notify(self, message: str, *, severity: SeverityLevel = "information", timeout: float | None = None,
               markup: bool = False) -> None:
        self.app.notify(message, severity=severity, timeout=timeout, markup=markup)

    def push_screen(self, screen: Screen[R], callback: Callable[[R | None], None] | None = None
                    ) -> None:
        self.app.push_screen(screen, callback)

    def go_back(self) -> None:
        self.host.go_back()

    def open_workload(self, key: WorkloadKey, *, created: bool = False) -> None:
        self.host.open_workload(key, created=created)

    # -- shared ----------------------------------------------------------------------------------------
    def refused(self, action: str) -> bool:
        if self.read_only:
            self.notify(f"read-only mode ({self.read_only_why}): refusing to {action}", severity="error",
                        markup=False)
            return True
        return False

    def _client(self) -> KubeClient:
        try:
            return self.data.api_client()
        except ConnectionProblem:
            raise ExecError("not connected to the API server", ExitCode.UNREACHABLE) from None

    async def _on_data(self, coro: Any) -> Any:
        return await asyncio.wrap_future(self.data.run_coroutine(coro))

    async def _reported(self, what: str, coro: Any) -> tuple[bool, Any]:
        """An action that changes the cluster, run on the data loop and told to the audit log (the
        SSH door's): (done, its result); a failure is said in a notification."""
        try:
            result = await self._on_data(coro)
        except Exception as exc:
            report(f"{what}: failed: {_message(exc)}")
            self.notify(_message(exc), severity="error", markup=False)
            return False, None
        report(f"{what}: ok")
        return True, result

    # -- shell -----------------------------------------------------------------------------------------
    def shell_into(self, wl: WorkloadView, rank: RankView | None = None) -> None:
        if self.refused(f"open a shell in {wl.name}"):
            return
        try:
            r = rank or pick_rank(wl)
        except (NotYet, ExecError) as exc:
            self.notify(_message(exc), severity="warning", markup=False)
            return
        why = not_running_reason(r)
        if why is not None:
            self.notify(f"cannot open a shell yet: {why}", severity="warning", markup=False)
            return
        self._run_shell(wl, r)

    @in_worker("shell", exclusive=True)
    async def _run_shell(self, wl: WorkloadView, r: RankView) -> None:
        """The app suspended (the terminal is the shell's) while the UI thread goes on: it awaits the
        session on the data loop rather than parking on it, applies the data that arrives (painted
        once the app is back: nothing is drawn while suspended), and catches window changes by
        SIGWINCH for the session (a handler can only be set on the main thread, the UI's)."""
        outcome: ExecOutcome | None = None
        problem = ""
        self.shell_open = True
        try:
            with self.app.batch_update(), self.app.suspend():
                try:
                    terminal = self.terminal()
                    with terminal.resizes_by_signal():
                        outcome, problem = await asyncio.wrap_future(
                            self.data.run_coroutine(self._shell(wl, r, terminal)))
                except Exception as exc:  # shown after the repaint
                    problem = _message(exc)
        except SuspendNotSupported:
            self.notify("a shell needs a real terminal (this one cannot be suspended)", severity="error",
                        markup=False)
            return
        finally:
            self.shell_open = False
            waiting, self._after_shell = self._after_shell, []
            for then in waiting:
                then()
        self.app.refresh(layout=True, repaint=True)
        if problem:
            self.notify(problem, severity="error", markup=False)
        elif outcome is not None:
            self.notify(f"shell in {r.pod} ended (exit {outcome.exit_code})", markup=False)

    def when_no_shell(self, then: Callable[[], None]) -> None:
        """`then` now, or once the shell that has the terminal ends (the app leaving meanwhile would
        take the terminal from it)."""
        if self.shell_open:
            self._after_shell.append(then)
        else:
            then()

    async def _shell(self, wl: WorkloadView, r: RankView, terminal: LocalTerminal) -> tuple[ExecOutcome, str]:
        client = self._client()
        target = await shell_target(client, wl, r)
        report(f"shell {wl.namespace}/{r.pod} container={target.container}")
        outcome = await run_shell_session(client, target, terminal, store=store_for(self.cfg))
        return outcome, await explain_end(client, target, outcome)

    # -- exec on all ranks -------------------------------------------------------------------------------
    def exec_all(self, wl: WorkloadView) -> None:
        if self.refused(f"run a command on the ranks of {wl.name}"):
            return

        def got(command: str | None) -> None:
            if command:
                self._exec(wl, command)

        self.push_screen(PromptScreen(f"Run on every rank of {wl.name}", placeholder="nvidia-smi -L"), got)

    def _exec(self, wl: WorkloadView, command: str) -> None:
        stopped = [why for r in wl.ranks if (why := not_running_reason(r)) is not None]
        if stopped or not wl.ranks:
            self.notify("not running: " + ("; ".join(stopped) or "no pods"), severity="warning", markup=False)
            return
        argv = ["/bin/sh", "-c", command]
        report(f"exec {wl.kind.lower()}/{wl.namespace}/{wl.name} ranks={len(wl.ranks)} command={command}")
        screen = ExecScreen(wl.key, [command])
        self.push_screen(screen)
        self._run_exec(screen, wl, argv)

    @in_worker("exec")
    async def _run_exec(self, screen: ExecScreen, wl: WorkloadView, argv: Sequence[str]) -> None:
        width = max(len(r.label) for r in wl.ranks)

        def on_line(r: RankView, channel: int, line: bytes) -> None:  # (on the data loop: never waits on the UI)
            screen.add_line(r.label, width, line.decode("utf-8", "replace"))

        async def go() -> list[Any]:
            start = time.time()
            results = await run_on_ranks(self._client(), wl, wl.ranks, argv, on_line)
            if wl.interactive:  # a launch run this way is one convert can take
                with contextlib.suppress(OSError):
                    await asyncio.to_thread(record_exec, store_for(self.cfg), wl, argv, results, start)
            return results

        try:
            results = await self._on_data(go())
        except Exception as exc:
            screen.finish(Text(f"failed: {_message(exc)}", style="bold"))
            return
        summary = Text()
        failed = 0
        for res in results:
            ok = res.ok
            failed += not ok
            summary.append(f"{res.rank.label}: exit {res.exit_code}" + (f" ({clean(res.error)})" if res.error else "")
                           + "  ", style="" if ok else "bold")
        summary.append("— all succeeded" if not failed else f"— {failed} failed", style="bold")
        screen.finish(summary)

    # -- delete, suspend, resume -----------------------------------------------------------------------------
    def delete_workload(self, wl: WorkloadView) -> None:
        if self.refused(f"delete {wl.name}"):
            return
        what = "interactive session" if wl.interactive else "workload"
        question = (f"Delete {what} {wl.kind.lower()}/{clean(wl.name)} in {clean(wl.namespace)} "
                    f"({wl.status}, {plural(len(wl.ranks), 'pod')})?")
        if wl.interactive:
            self._ask_before_losing(wl, "delete", question)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._lifecycle(wl, "delete")

        self.push_screen(ConfirmScreen(Text(question), yes="Delete"), answered)

    def toggle_suspend(self, wl: WorkloadView) -> None:
        verb = "resume" if wl.status == "Suspended" else "suspend"
        if self.refused(f"{verb} {wl.name}"):
            return
        if verb == "suspend" and wl.interactive:
            self._ask_before_losing(wl, verb, f"Suspend interactive session {wl.kind.lower()}/{clean(wl.name)}?")
            return
        extra = " (its pods are deleted; the job stays)" if verb == "suspend" else ""
        question = Text(f"{verb.capitalize()} {wl.kind.lower()}/{clean(wl.name)}{extra}?")

        def answered(yes: bool | None) -> None:
            if yes:
                self._lifecycle(wl, verb)

        self.push_screen(ConfirmScreen(question, yes=verb.capitalize()), answered)

    @in_worker("lifecycle", exclusive=True)
    async def _ask_before_losing(self, wl: WorkloadView, verb: str, question: str) -> None:
        """An interactive session: its shells' histories kept first, then the question with what
        the pods take with them and what ranks keeps; it starts on Cancel."""
        self.notify(f"keeping the shell histories of {wl.name} first...", timeout=3, markup=False)
        try:
            kept = await self._on_data(keep_before_losing(self._client(), wl, store_for(self.cfg)))
        except Exception:
            kept = -1

        def answered(yes: bool | None) -> None:
            if yes:
                self._lifecycle(wl, verb)

        text = Text(question)
        note = loss_note(verb, wl, kept)
        text.append("\n\n" + note[:1].upper() + note[1:])
        self.push_screen(ConfirmScreen(text, yes=verb.capitalize(), destructive=True), answered)

    @in_worker("lifecycle")
    async def _lifecycle(self, wl: WorkloadView, verb: str) -> None:
        async def go() -> None:
            target = lifecycle.target_of(wl)
            client = self._client()
            if verb == "delete":
                await lifecycle.delete(client, target)
            else:
                await lifecycle.set_suspended(client, target, verb == "suspend")

        done, _ = await self._reported(f"{verb} {wl.kind.lower()}/{wl.namespace}/{wl.name}", go())
        if not done:
            return
        self.notify(f"{wl.name}: {verb}{'d' if verb.endswith('e') else 'ed'}", markup=False)

    # -- convert ----------------------------------------------------------------------------------------------
    def convert_workload(self, wl: WorkloadView) -> None:
        if self.refused(f"convert {wl.name}"):
            return
        if not wl.interactive:
            self.notify(f"{wl.name} is not an interactive session", severity="warning", markup=False)
            return
        self._open_convert(wl)

    @in_worker("convert", exclusive=True)
    async def _open_convert(self, wl: WorkloadView) -> None:
        async def go() -> tuple[dict[str, Any], list[Launch], dict[str, Any] | None, str | None, GpuFit | None]:
            client = self._client()
            store = store_for(self.cfg)
            target = lifecycle.target_of(wl)
            job = await lifecycle.get(client, target)
            history: list[Launch] = []
            with contextlib.suppress(ExecError, SessionError, OSError):  # no history: the form starts empty
                history = await session_launches(client, wl, store, job)
            saved = await asyncio.to_thread(store.load, wl.namespace, wl.kind, wl.name, wl.uid)
            base, default = await debug.original(client, target, job, saved)
            # (on the data loop: the model is read where it is written)
            fit = self.data.gpu_fit(wl.namespace, convert.gpu_demands(base or job), me=self.me, first=wl.key)
            return job, history, base, default, fit

        try:
            job, history, base, default, fit = await self._on_data(go())
        except Exception as exc:
            self.notify(_message(exc), severity="error", markup=False)
            return
        waits = [] if fit is None else convert.waits_on(fit, wl.key, time.time(), self.paste_command)
        frees = fit is not None and any(h.key == wl.key for h in fit.holders)

        def build(job: dict[str, Any], command: str, name: str | None, exports: Exports) -> Conversion:
            """The dashboard puts a launch's secrets in a Secret named after the new job, always."""
            new_name = name or default or convert.default_name(job["metadata"]["name"])
            prep = launch_env.prepare(command, exports, secret=launch_env.default_secret_name(new_name))
            new = convert.unattended(job, prep.command, name or default, base=base, env=prep.env)
            return Conversion(new, launch_env.masked(convert.diff(base or job, new), prep.values),
                              (prep.secret, prep.secret_data) if prep.secret else None,
                              tuple(launch_env.masked(n, prep.values) for n in prep.notes()))

        self.push_screen(ConvertScreen(wl.key, job, history, build, waits=waits, delete_first=frees))

    def submit_conversion(self, key: WorkloadKey, new: dict[str, Any], delete_interactive: bool,
                          secret: tuple[str, dict[str, str]] | None = None) -> None:
        wl = self.store.workloads.get(key)
        if wl is None:
            self.notify("the interactive session is gone", severity="error", markup=False)
            return
        question, destroys = convert.confirmation(wl.kind, new["metadata"]["name"], wl.namespace,
                                                  delete_session=delete_interactive)

        def answered(yes: bool | None) -> None:
            if yes:
                self._convert(wl, new, delete_interactive, secret)

        self.push_screen(ConfirmScreen(Text(question), yes="Submit", destructive=destroys), answered)

    @in_worker("convert")
    async def _convert(self, wl: WorkloadView, new: dict[str, Any], delete_interactive: bool,
                       secret: tuple[str, dict[str, str]] | None = None) -> None:
        async def go() -> lifecycle.Target:
            client = self._client()
            source = lifecycle.target_of(wl)
            created = await convert.create(client, source, new, secret)
            if delete_interactive:
                await lifecycle.delete(client, source)
            return created

        what = f"convert {wl.kind.lower()}/{wl.namespace}/{wl.name} to {new['metadata']['name']}" + \
            (" deleting the session" if delete_interactive else "")
        done, created = await self._reported(what, go())
        if not done:
            return
        self.notify(f"{created.ref} created" + (f"; {wl.name} deleted" if delete_interactive else ""), markup=False)
        self.go_back()
        self.open_workload((created.namespace, created.kind, created.name), created=True)

    # -- debug: a session made from a job --------------------------------------------------------------
    def debug_workload(self, wl: WorkloadView) -> None:
        """A failed or running job back into an interactive session (`ranks debug`), asked first."""
        if self.refused(f"create a debug session of {wl.name}"):
            return
        if wl.interactive:
            self.notify(f"{wl.name} is an interactive session already: s opens its shell", severity="warning",
                        markup=False)
            return
        if wl.kind not in convert.REPLICA_FIELDS:
            self.notify(f"cannot debug a {wl.kind}: only Kubeflow PyTorchJob, TFJob, XGBoostJob and MPIJob",
                        severity="warning", markup=False)
            return
        name = debug.default_name(wl.name)
        how = debug.failure_of(wl)
        question = Text(f"Create the interactive session {wl.kind.lower()}/{name} from {clean(wl.name)} ({how})?\n\n"
                        "The same image, env, volumes, resources and replicas; every "
                        f"{'launcher' if wl.kind == 'MPIJob' else 'replica'} runs sleep infinity; the job's command "
                        "is in the session's shell history (s, then up-arrow, runs it as the job did); t converts "
                        "it back, with the diff against the job.")

        def answered(yes: bool | None) -> None:
            if yes:
                self._debug(wl, name, how)

        self.push_screen(ConfirmScreen(question, yes="Create"), answered)

    @in_worker("submit", exclusive=True)
    async def _debug(self, wl: WorkloadView, name: str, how: str) -> None:
        async def go() -> dict[str, Any]:
            client = self._client()
            target = lifecycle.target_of(wl)
            job = await lifecycle.get(client, target)
            session = debug.session_from(job, name, failure=how)
            return await debug.create_session(client, target, session, job, store_for(self.cfg))

        done, _ = await self._reported(f"debug {wl.kind.lower()}/{wl.namespace}/{wl.name} as {name}", go())
        if not done:
            return
        self.notify(f"{name} created: s opens its shell once it runs", markup=False)
        self.open_workload((wl.namespace, wl.kind, name), created=True)

    # -- new session ----------------------------------------------------------------------------------------------
    def new_session(self, namespace: str | None = None) -> None:
        if self.refused("submit a new session"):
            return
        projects = sorted(((p.name, p.namespace) for p in self.store.projects.values()), key=lambda x: x[0])
        self.push_screen(NewSessionScreen(projects, namespace or (projects[0][1] if len(projects) == 1 else None),
                                          self._submit_form))

    def _submit_form(self, values: dict[str, Any]) -> None:
        screen = self.app.screen
        if not isinstance(screen, NewSessionScreen):
            return
        try:
            spec = spec_from_form(values, self.me, self.store.projects.get(values["namespace"]))
        except ValueError as exc:
            screen.show_problems([("", str(exc))])
            return
        problems = [(p.flag, p.message) for p in spec_problems(spec)]
        if not values["namespace"]:
            problems = [("--project", "choose a project")] + [p for p in problems if "project" not in p[0]]
        if problems:
            screen.show_problems(problems)
            return
        self._submit_spec(spec)

    @in_worker("submit", exclusive=True)
    async def _submit_spec(self, spec: SubmitSpec) -> None:
        async def go() -> dict[str, Any]:
            return await submit(self._client(), spec)

        what = f"submit {spec.framework} {spec.namespace}/{spec.name}"
        try:
            created = await self._on_data(go())
        except SessionError as exc:
            report(f"{what}: failed: {exc.message}")
            screen = self.app.screen
            if isinstance(screen, NewSessionScreen):
                screen.show_problems([("", exc.message)])
            return
        except Exception as exc:
            report(f"{what}: failed: {_message(exc)}")
            self.notify(_message(exc), severity="error", markup=False)
            return
        report(f"{what}: ok")
        self.notify(f"{created['kind'].lower()}/{spec.name} submitted", markup=False)
        self.go_back()
        self.open_workload((spec.namespace, created["kind"], spec.name), created=True)


def spec_from_form(values: dict[str, Any], user: str, project: Any) -> SubmitSpec:
    """The form's strings as a SubmitSpec (numbers parsed; lists split on commas)."""
    def number(field: str, cast: Any, default: Any = None) -> Any:
        raw = values.get(field, "")
        if not raw:
            return default
        try:
            return cast(raw)
        except ValueError:
            raise ValueError(f"{field.replace('_', ' ')}: not a number: {raw!r}") from None

    def items(field: str) -> list[str]:
        return [x.strip() for x in values.get(field, "").split(",") if x.strip()]

    command = values.get("command") or None
    return SubmitSpec(
        name=values.get("name", ""), framework=str(values.get("framework") or "pytorch"),
        image=values.get("image", ""), workers=number("workers", int, 0),
        namespace=values.get("namespace", ""), project=getattr(project, "name", "") or "", user=user,
        gpus=number("gpus", int, 0), gpu_portion=number("gpu_portion", float),
        slots_per_worker=number("slots_per_worker", int), cpu=values.get("cpu") or None,
        memory=values.get("memory") or None, env=items("env"), volumes=items("volumes"),
        node_pool=values.get("node_pool") or None, interactive=command is None, command=command,
        ports=items("ports"), jupyter=values.get("jupyter", "").lower() in ("yes", "y", "true", "1"),
        tensorboard=values.get("tensorboard") or None,
    )
