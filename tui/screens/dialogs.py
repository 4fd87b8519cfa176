"""Dialogs and screens of the actions (#7): confirm, a one-line prompt, exec output, the
convert diff, the new-session form. They collect input and show results; the work runs on the
data loop (tui/dashboard_actions.py)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.style import Style as VisualStyle
from textual.widgets import Button, Checkbox, Input, Label, Log, OptionList, Select, Static

from monitors.sanitize import clean
from sessions.launch_env import Exports
from sessions.launches import Launch, launch_choices

from ..widgets.picker import Picker
from .base import RanksScreen

DIALOG_CSS = """
    {cls} {{ align: center middle; }}
    {cls} > Vertical {{ width: 76; max-width: 100%; height: auto; max-height: 90%; border: round $accent;
                       background: $surface; padding: 0 1; }}
    {cls}.-ascii > Vertical {{ border: ascii $accent; }}
    {cls} .buttons {{ height: auto; align-horizontal: right; margin-top: 1; }}
    {cls} Button {{ margin-left: 1; min-width: 10; }}
    {cls} .error {{ color: $error; height: auto; }}
"""


def _ascii(screen: ModalScreen[Any]) -> None:
    glyphs = getattr(screen.app, "glyphs", None)
    screen.set_class(getattr(glyphs, "name", "") == "ascii", "-ascii")


DESTRUCTIVE = frozenset({"delete"})  # actions whose confirmation starts on Cancel


def submit_or_cancel() -> ComposeResult:
    """The buttons under a form: Submit (the action) and Cancel."""
    with Horizontal(classes="buttons"):
        yield Button("Submit", variant="primary", id="submit")
        yield Button("Cancel", id="cancel")


def steady_inputs(screen: Screen[Any]) -> None:
    """No blinking cursors (a blink is a redraw, twice a second, over SSH too)."""
    for inp in screen.query(Input):
        inp.cursor_blink = False


class ConfirmScreen(ModalScreen[bool]):
    """Yes or no: y confirms, n/Esc cancel, Enter presses the focused button. The focus starts on
    the action when it is harmless (suspend, resume, submit) and on Cancel when it destroys
    (`destructive`; by default when the action is "Delete"). Cancelling says so ("cancelled")."""

    BINDINGS: ClassVar[list[BindingType]] = [("y", "answer(True)", "Yes"), ("n,escape", "answer(False)", "No")]
    DEFAULT_CSS = DIALOG_CSS.format(cls="ConfirmScreen")
    # (the button focused as the screen is composed: Textual's default, the first, would leave the
    # destructive one focused until `on_mount` moves it, and an Enter then would confirm)
    AUTO_FOCUS = "Button.-start"

    def __init__(self, question: Text | str, yes: str = "Yes", *, destructive: bool | None = None) -> None:
        super().__init__()
        self.question = question if isinstance(question, Text) else Text(question)
        self.yes = yes
        self.destructive = yes.lower() in DESTRUCTIVE if destructive is None else destructive

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question)
            with Horizontal(classes="buttons"):
                yield Button(self.yes, variant="error" if self.destructive else "primary", id="yes",
                             classes="" if self.destructive else "-start")
                yield Button("Cancel", id="no", classes="-start" if self.destructive else "")

    def on_mount(self) -> None:
        _ascii(self)
        self.query_one("#no" if self.destructive else "#yes", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.action_answer(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        if not value:
            self.app.notify("cancelled", timeout=2, markup=False)
        self.dismiss(value)


class TickBox(Checkbox):
    """A checkbox that reads as ticked or not without colour: `[x]` / `[ ]` with --ascii or in
    mono, otherwise the box shows its X only when ticked."""

    @property
    def _button(self) -> Content:
        style = self.get_visual_style("toggle--button")
        glyphs = getattr(self.app, "glyphs", None)
        look = getattr(self.app, "look", None)
        if getattr(glyphs, "name", "") == "ascii" or getattr(look, "mono", False):
            return Content.assemble((f"[{'x' if self.value else ' '}]", VisualStyle(bold=self.value)))
        side = VisualStyle(foreground=style.background, background=self.background_colors[1])
        return Content.assemble((self.BUTTON_LEFT, side), ("X" if self.value else " ", style),
                                (self.BUTTON_RIGHT, side))


class PromptScreen(ModalScreen[str | None]):
    """One line of input (Enter submits, Esc cancels), with choices to pick from."""

    takes_text = True  # keys typed ahead of its input go into it (widgets.type_ahead)

    BINDINGS: ClassVar[list[BindingType]] = [("escape", "cancel", "Cancel")]
    DEFAULT_CSS = DIALOG_CSS.format(cls="PromptScreen") + """
    PromptScreen OptionList { height: auto; max-height: 8; }
    """

    def __init__(self, title: str, value: str = "", placeholder: str = "", choices: Sequence[str] = ()) -> None:
        super().__init__()
        self.title_text = title
        self.value = value
        self.placeholder = placeholder
        self.choices = list(choices)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text(self.title_text, style="bold"))
            yield Input(self.value, placeholder=self.placeholder, id="prompt")
            if self.choices:
                yield Label(Text("or pick one (most recent first):", style="dim"))
                yield Picker(*[Text(clean(c, limit=300)) for c in self.choices], id="choices")

    def on_mount(self) -> None:
        _ascii(self)
        inp = self.query_one(Input)
        inp.cursor_blink = False
        inp.focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.query_one(Input).value = self.choices[event.option_index]
        self.query_one(Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)


class ExecScreen(RanksScreen):
    """Output of one command on several ranks, prefixed by rank, then each rank's exit status."""

    DEFAULT_CSS = """
    ExecScreen Log { height: 1fr; }
    ExecScreen #summary { height: auto; padding: 0 1; background: $panel; }
    """

    MAX_LINES = 20_000  # the output kept (the oldest lines go first)

    class LinesWaiting(Message):
        """Lines of output wait in the screen's batch (one such message at a time)."""

    def __init__(self, key: tuple[str, str, str], command: Sequence[str]) -> None:
        super().__init__()
        self.key = key
        self.command = list(command)
        self.done = False
        self._waiting: deque[str] = deque(maxlen=self.MAX_LINES)
        self._waiting_lock = threading.Lock()
        self._posted = False

    @property
    def crumb(self) -> str:
        return f"exec {clean(' '.join(self.command), limit=40)}"

    def body(self) -> ComposeResult:
        yield Log(max_lines=self.MAX_LINES, id="output")
        yield Static(Text("running…", style="italic"), id="summary")

    def add_line(self, label: str, width: int, line: str) -> None:
        """A line of a rank's output, from any thread, never waiting for the UI: it joins the batch,
        and one message at a time takes the batch to the screen (what arrives while the UI is busy
        goes in one write)."""
        text = f"[{label:<{width}}] {clean(line.rstrip(chr(10)), limit=4000)}"
        with self._waiting_lock:
            self._waiting.append(text)
            if self._posted:
                return
            self._posted = True
        self.post_message(self.LinesWaiting())

    def on_exec_screen_lines_waiting(self, _: LinesWaiting) -> None:
        self._write_waiting()

    def _write_waiting(self) -> None:
        with self._waiting_lock:
            lines = list(self._waiting)
            self._waiting.clear()
            self._posted = False
        if lines:
            self.query_one(Log).write_lines(lines)

    def finish(self, summary: Text) -> None:
        """Every rank has ended: the lines still in the batch are written, then the summary."""
        self._write_waiting()
        self.done = True
        self.query_one("#summary", Static).update(summary)

    def action_back(self) -> None:
        self.dashboard.go_back()


@dataclass(frozen=True)
class Conversion:
    """What the convert screen shows and submits: the new job, its diff (secrets masked), the Secret
    to create with it (name, data) and notes (what was carried into its env, where its secrets went)."""

    new: dict[str, Any]
    diff: str
    secret: tuple[str, dict[str, str]] | None = None
    notes: tuple[str, ...] = ()


class ConvertScreen(RanksScreen):
    """The unattended job's diff against the interactive one, with the command, name and a confirm."""

    BINDINGS: ClassVar[list[BindingType]] = [("ctrl+s", "submit", "Submit")]
    DEFAULT_CSS = """
    ConvertScreen #form { height: auto; padding: 0 1; }
    ConvertScreen #form Input { width: 1fr; }
    ConvertScreen #form Horizontal { height: auto; }
    ConvertScreen #form Label { width: 10; padding-top: 1; }
    ConvertScreen #diff { height: 1fr; padding: 0 1; }
    ConvertScreen #problem { color: $error; height: auto; padding: 0 1; }
    ConvertScreen #history { height: auto; max-height: 6; }
    ConvertScreen #history-note { color: $warning; height: auto; }
    ConvertScreen #waits { color: $warning; height: auto; }
    ConvertScreen .buttons { height: auto; align-horizontal: right; }
    ConvertScreen Button { margin-left: 1; }
    """

    def __init__(self, key: tuple[str, str, str], job: dict[str, Any], history: Sequence[Launch],
                 build: Callable[[dict[str, Any], str, str | None, Exports], Conversion], *,
                 waits: Sequence[str] = (), delete_first: bool = False) -> None:
        """`waits`: what the new job would wait for (its own session's GPUs first); `delete_first`:
        the session holds GPUs it needs, so deleting it once the job is created starts ticked."""
        super().__init__()
        self.key = key
        self.waits = list(waits)
        self.delete_first = delete_first
        self.job = job
        self.history = list(history)  # the launches of the session's shell history, most recent first
        self.choices = launch_choices(self.history, allow_failed=False)  # what the picker lists
        self.build = build  # (job, command, name, exports) -> the conversion; raises SessionError
        self.ready = False  # the form whole: every field mounted, the command focused, its diff shown
        self.new: dict[str, Any] | None = None
        self.secret: tuple[str, dict[str, str]] | None = None  # the Secret to create with it
        self.exports = self.choices[0].exports if self.choices else Exports()  # the picked launch's shell's
        self.now = time.time()

    def _option(self, launch: Launch) -> Text:
        return Text(clean(f"{launch.outcome()}, {launch.when(self.now).removeprefix('from ')}: {launch.shown}",
                          limit=300))

    def _note(self) -> str:
        """Why the picker is empty or lists launches that failed ("" when it says nothing)."""
        if not self.history or any(launch.ok for launch in self.history):
            return ""
        last = self.history[0]
        return (f"no launch in the shell history exited 0 (the last, {last.when(self.now)}, has "
                f"{last.outcome()}); tick the box below to pick one anyway")

    @property
    def crumb(self) -> str:
        return f"convert {self.key[2]}"

    def body(self) -> ComposeResult:
        with Vertical(id="form"):
            with Horizontal():
                yield Label("command")
                yield Input(self.choices[0].command if self.choices else "", id="command",
                            placeholder="what the job runs, e.g. horovodrun -np 4 -hostfile /etc/mpi/hostfile "
                                        "python train.py")
            with Horizontal():
                yield Label("name")
                yield Input(id="name", placeholder=f"{self.key[2]}-train")
            if self.history:
                if self._note():
                    yield Static(Text(clean(self._note())), id="history-note")
                yield Picker(*[self._option(c) for c in self.choices], id="history")
                if not all(launch.ok for launch in self.history):
                    yield TickBox("list launches that did not exit 0 too", id="allow-failed")
            if self.waits:
                yield Static(Text(clean("; ".join(self.waits), limit=600)), id="waits")
            yield TickBox("delete the interactive session once the job is created", self.delete_first, id="delete")
        yield Static(id="problem")
        with VerticalScroll(id="diff"):
            yield Static(id="difftext")
        yield from submit_or_cancel()

    def on_mount(self) -> None:
        super().on_mount()
        self._form_ready()

    def _form_ready(self) -> None:
        """Focus the command and show its diff once the form's nested rows are mounted (on a loaded
        machine the screen's Mount can come before its containers have mounted their children)."""
        if not self._composed():
            self.call_after_refresh(self._form_ready)
            return
        steady_inputs(self)
        self.query_one("#command", Input).focus()
        self.rebuild()
        self.ready = True

    def _composed(self) -> bool:
        return all(self.query(f"#{wid}") for wid in ("command", "name", "problem", "difftext"))

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        if self._composed():
            self.rebuild()

    @on(OptionList.OptionSelected, "#history")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.exports = self.choices[event.option_index].exports
        self.query_one("#command", Input).value = self.choices[event.option_index].command

    @on(Checkbox.Changed, "#allow-failed")
    def _allow_failed(self, event: Checkbox.Changed) -> None:
        """The dashboard's --allow-failed: the picker lists every launch, with its exit status."""
        self.choices = launch_choices(self.history, allow_failed=event.value)
        picker = self.query_one("#history", OptionList)
        picker.clear_options()
        picker.add_options([self._option(c) for c in self.choices])

    def rebuild(self) -> None:
        command = self.query_one("#command", Input).value
        name = self.query_one("#name", Input).value.strip() or None
        problem = self.query_one("#problem", Static)
        try:
            done = self.build(self.job, command, name, self.exports)
        except Exception as exc:  # SessionError: show it, keep the form
            self.new = None
            problem.update(Text(clean(getattr(exc, "message", str(exc)), limit=300)))
            self.query_one("#difftext", Static).update("")
            return
        self.new, self.secret = done.new, done.secret
        problem.update(Text(clean("; ".join(done.notes), limit=600)) if done.notes else "")
        self.query_one("#difftext", Static).update(DiffView(diff_text(done.diff)))

    @on(Button.Pressed, "#submit")
    def _submit(self) -> None:
        self.action_submit()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dashboard.go_back()

    def action_submit(self) -> None:
        if self.new is None:
            self.notify("fix the problem first", severity="error", markup=False)
            return
        delete = self.query_one("#delete", Checkbox).value
        self.dashboard.actions.submit_conversion(self.key, self.new, delete, self.secret)

    def action_back(self) -> None:
        self.dashboard.go_back()


def diff_text(diff: str) -> Text:
    t = Text(no_wrap=True)
    for line in diff.splitlines():
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else \
            "bold" if line.startswith("@@") else "dim"
        t.append(clean(line, limit=500) + "\n", style=style)
    return t


class DiffView:
    """A diff (`diff_text`) drawn at the width it is given: a line too long for it wraps, and every
    row it wraps onto starts with the line's own marker (+, -, or a space for context), so a reader
    (with or without colour) never takes an added line's continuation for context or removal."""

    def __init__(self, text: Text) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text.plain

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        avail = max(1, options.max_width - 1)  # the marker's column is the gutter
        for line in self.text.split("\n"):
            marker, body = line[:1], line[1:]
            rows = body.wrap(console, avail, overflow="fold", no_wrap=False) if body.plain else [Text()]
            for row in rows:
                out = Text.assemble(marker, row, no_wrap=True, end="\n")
                out.rstrip_end(avail + 1)
                yield out


class NewSessionScreen(RanksScreen):
    """The `ranks submit` form: the same fields and the same validation."""

    takes_text = True  # keys typed ahead of its input go into it (widgets.type_ahead)

    BINDINGS: ClassVar[list[BindingType]] = [("ctrl+s", "submit", "Submit")]
    DEFAULT_CSS = """
    NewSessionScreen VerticalScroll { height: 1fr; padding: 0 1; }
    NewSessionScreen Horizontal { height: auto; }
    NewSessionScreen Label.field { width: 18; padding-top: 1; }
    NewSessionScreen Input, NewSessionScreen Select { width: 1fr; }
    NewSessionScreen #problems { color: $error; height: auto; padding: 0 1; }
    NewSessionScreen .buttons { height: auto; align-horizontal: right; }
    NewSessionScreen Button { margin-left: 1; }
    """
    crumb = "new session"
    FIELDS: ClassVar[list[tuple[str, str, str]]] = [
        ("name", "name", "my-session"),
        ("image", "image", "nvcr.io/nvidia/pytorch:24.10-py3"),
        ("workers", "workers", "2"),
        ("gpus", "GPUs per worker", "1"),
        ("gpu_portion", "GPU portion", "(instead of GPUs: 0.5)"),
        ("slots_per_worker", "slots per worker", "(MPI; default: GPUs)"),
        ("cpu", "CPU", "(e.g. 4)"),
        ("memory", "memory", "(e.g. 16Gi)"),
        ("env", "env", "K=V,K2=V2"),
        ("volumes", "volumes", "PVC:/path,PVC2:/data:ro"),
        ("node_pool", "node pool", "(any)"),
        ("command", "command", "(empty: interactive, sleep infinity)"),
        ("ports", "ports", "(lead replica: 8888:jupyter,6006)"),
        ("jupyter", "Jupyter", "(yes: start it on the lead, port 8888)"),
        ("tensorboard", "TensorBoard", "(a log directory: start it on the lead, port 6006)"),
    ]
    FLAGS: ClassVar[dict[str, str]] = {"NAME": "name", "-i/--image": "image", "--image": "image",
                                       "--workers": "workers", "-g/--gpus": "gpus", "--gpus": "gpus",
                                       "--gpu-portion": "gpu_portion", "--slots-per-worker": "slots_per_worker",
                                       "--cpu": "cpu", "--memory": "memory", "--env": "env", "--volume": "volumes",
                                       "--node-pool": "node_pool", "--command": "command", "--port": "ports",
                                       "--jupyter": "jupyter", "--tensorboard": "tensorboard"}

    def __init__(self, projects: Sequence[tuple[str, str]], project: str | None,
                 on_submit: Callable[[dict[str, Any]], None]) -> None:
        super().__init__()
        self.projects = list(projects)  # (label, namespace)
        self.project = project
        self.on_submit = on_submit

    def body(self) -> ComposeResult:
        with VerticalScroll():
            with Horizontal():
                yield Label("project", classes="field")
                yield Select(self.projects, value=self.project if self.project else Select.NULL,
                             id="project", allow_blank=not self.project)
            with Horizontal():
                yield Label("framework", classes="field")
                yield Select([(f, f) for f in ("mpi", "pytorch", "tensorflow", "xgboost")], value="pytorch",
                             allow_blank=False, id="framework")
            for fid, label, placeholder in self.FIELDS:
                with Horizontal():
                    yield Label(label, classes="field")
                    value = {"workers": "2", "gpus": "1", "image": "nvcr.io/nvidia/pytorch:24.10-py3"}.get(fid, "")
                    yield Input(value, placeholder=placeholder, id=f"f-{fid}")
        yield Static(id="problems")
        yield from submit_or_cancel()

    def on_mount(self) -> None:
        super().on_mount()
        steady_inputs(self)
        self.query_one("#f-name", Input).focus()

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {fid: self.query_one(f"#f-{fid}", Input).value.strip() for fid, _, _ in self.FIELDS}
        out["framework"] = self.query_one("#framework", Select).value
        project = self.query_one("#project", Select).value
        out["namespace"] = "" if project is Select.NULL else str(project)
        return out

    def show_problems(self, problems: Sequence[tuple[str, str]]) -> None:
        """(flag, message) pairs; the first field with a problem takes the focus."""
        text = Text()
        for _flag, message in problems:
            text.append(f"{clean(message, limit=300)}\n")
        self.query_one("#problems", Static).update(text)
        for flag, _ in problems:
            fid = self.FLAGS.get(flag)
            if fid:
                self.query_one(f"#f-{fid}", Input).focus()
                break

    @on(Button.Pressed, "#submit")
    def _submit(self) -> None:
        self.action_submit()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dashboard.go_back()

    def action_submit(self) -> None:
        self.on_submit(self.values())

    def action_back(self) -> None:
        self.dashboard.go_back()
