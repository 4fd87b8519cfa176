"""LogView: the Line API view of merged logs (lazy rendering, tail, wrap, filters, save)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import App, ComposeResult

from monitors.logs.buffer import LineBuffer
from monitors.logs.filters import LineFilter
from monitors.logs.lines import LogLine, Origin
from monitors.logs.terminal_text import SafeText, sanitize_line
from tui.widgets.log_view import LogSource, LogView, palette_from_theme

PALETTE = ["#ff0000", "#00ff00", "#0000ff", "#ffff00"]
ORIGINS = [Origin(f"worker-{r}", r, "worker", r, "ns", f"job-worker-{r}", "main") for r in range(4)]
T0 = 1_767_225_600 * 1_000_000_000  # 2026-01-01T00:00:00Z


class FakeSource:
    """`n` lines made on demand (nothing is built up front); counts reads."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.total = n
        self.reads = 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> LogLine:
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        self.reads += 1
        return LogLine(T0 + i * 1_000_000, f"step {i} loss=0.{i % 97}".encode(), ORIGINS[i % 4])

    def append(self, k: int) -> None:
        self.n += k
        self.total += k


@dataclass
class PlainLine:
    label: str
    rank: int | None
    ts: int
    text: SafeText
    pod: str = ""


class ListSource(list):
    pass


class ViewApp(App[None]):
    def __init__(self, view: LogView) -> None:
        super().__init__()
        self.view = view

    def compose(self) -> ComposeResult:
        yield self.view


async def settle(pilot, view: LogView) -> None:
    await pilot.pause(0.05)
    await pilot.pause()


def rows(view: LogView) -> list[str]:
    return view.visible_text()


async def test_only_visible_lines_are_rendered_and_tail_shows_the_end() -> None:
    src = FakeSource(200_000)
    view = LogView(src, palette=PALETTE, labels=[o.label for o in ORIGINS])
    assert isinstance(src, LogSource)
    async with ViewApp(view).run_test(size=(80, 24)) as pilot:
        await settle(pilot, view)
        height = view.scrollable_content_region.height
        assert view.virtual_size.height == 200_000
        assert view.scroll_y == view.max_scroll_y > 199_000
        assert 0 < view.render_count <= 4 * 24
        assert src.reads <= 3 * 24  # strips are cached: a line is read once per look
        text = rows(view)
        assert text[height - 1] == f"[worker-3] step 199999 loss=0.{199999 % 97}"
        assert text[0].startswith("[worker-")

        # many notifications in one frame: one flush, one repaint of the visible rows
        view.render_count = 0
        src.reads = 0
        flushes = 0
        real_flush = view.flush

        def counting_flush() -> bool:
            nonlocal flushes
            flushes += 1
            return real_flush()

        view.flush = counting_flush  # type: ignore[method-assign]
        for _ in range(50):
            src.append(2)
            view.notify_appended()
        await settle(pilot, view)
        assert flushes == 1
        assert 0 < view.render_count <= 2 * 24
        assert src.reads <= 100 + 24  # the new lines at the bottom, nothing else
        assert rows(view)[height - 1].endswith(f"step 200099 loss=0.{200099 % 97}")

        # nothing changed: no repaint at all
        view.render_count = 0
        view.notify_appended()
        await settle(pilot, view)
        assert flushes == 2
        assert view.render_count == 0


async def test_scrolling_up_stops_tail_counts_new_lines_and_end_resumes() -> None:
    src = FakeSource(200_000)
    view = LogView(src, palette=PALETTE, labels=[o.label for o in ORIGINS])
    async with ViewApp(view).run_test(size=(80, 24)) as pilot:
        await settle(pilot, view)
        assert view.tail
        await pilot.press("pageup")
        await settle(pilot, view)
        assert not view.tail
        top = view.scroll_y
        first = rows(view)[0]
        src.append(123)
        view.notify_appended()
        await settle(pilot, view)
        assert view.new_lines == 123
        assert view.scroll_y == top  # stays where the user is
        assert rows(view)[0] == first
        height = view.scrollable_content_region.height
        footer = view.render_line(height - 1).text
        assert "▼ 123 new lines (End to follow)" in footer
        src.append(7)
        view.notify_appended()
        await settle(pilot, view)
        assert view.new_lines == 130

        await pilot.press("end")
        await settle(pilot, view)
        assert view.tail
        assert view.new_lines == 0
        assert view.scroll_y == view.max_scroll_y
        assert rows(view)[height - 1].endswith(f"step {src.n - 1} loss=0.{(src.n - 1) % 97}")
        src.append(1)
        view.notify_appended()
        await settle(pilot, view)
        assert view.scroll_y == view.max_scroll_y
        assert view.new_lines == 0


async def test_wrap_splits_a_long_line_across_rows() -> None:
    long = "abcdefghij" * 30  # 300 characters
    lines = ListSource([
        PlainLine("worker-0", 0, T0, SafeText("short")),
        PlainLine("worker-1", 1, T0, SafeText(long)),
        PlainLine("launcher", None, T0, SafeText("end")),
    ])
    view = LogView(lines, palette=PALETTE)
    async with ViewApp(view).run_test(size=(80, 24)) as pilot:
        await settle(pilot, view)
        unwrapped = [r for r in rows(view) if r]
        assert len(unwrapped) == 3
        assert unwrapped[1].startswith("[worker-1] abcdefghij")
        assert len(unwrapped[1]) < 100  # cut at the edge, scrolls horizontally

        view.wrap = True
        await settle(pilot, view)
        wrapped = [r for r in rows(view) if r]
        assert wrapped[0] == "[worker-0] short"
        body = wrapped[1:-1]
        assert len(body) >= 4
        assert body[0].startswith("[worker-1] ")
        assert all(r.startswith(" " * 11) for r in body[1:])  # continuation rows are indented
        assert "".join(r[11:] for r in body) == long
        assert wrapped[-1] == "[launcher] end"
        assert all(len(r) <= view.scrollable_content_region.width for r in wrapped)


async def test_markup_and_escape_sequences_show_literally() -> None:
    lines = ListSource([
        PlainLine("worker-0", 0, T0, sanitize_line(b"[bold]x[/] [link=http://evil]y[/link]")),
        PlainLine("worker-1", 1, T0, sanitize_line(b"\x1b[31mred\x1b[0m \x1b]0;title\x07ok \x1b[2Jdone")),
    ])
    view = LogView(lines, palette=PALETTE)
    async with ViewApp(view).run_test(size=(80, 24)) as pilot:
        await settle(pilot, view)
        text = [r for r in rows(view) if r]
        assert text == ["[worker-0] [bold]x[/] [link=http://evil]y[/link]", "[worker-1] red ok done"]
        strip = view.render_line(1)
        assert all("\x1b" not in seg.text for seg in strip)
        red = [seg for seg in strip if seg.text == "red"]
        assert red and red[0].style is not None and red[0].style.color is not None
        assert red[0].style.color.name == "red"
        label = [seg for seg in view.render_line(0) if seg.text == "[worker-0]"]
        assert label and label[0].style.color.triplet.hex == "#ff0000"
        bold = [seg for seg in view.render_line(0) if "[bold]" in seg.text]
        assert bold and not bold[0].style.bold


async def test_filter_timestamps_and_save_write_what_is_shown(tmp_path) -> None:
    buf = LineBuffer(1000)
    buf.extend(LogLine(T0 + i * 1_000_000_000, f"step {i} {'even' if i % 2 == 0 else 'odd'}".encode(),
                       ORIGINS[i % 4] if i != 5 else Origin("launcher", None, "launcher"))
               for i in range(10))
    view = LogView(buf, palette=PALETTE)
    async with ViewApp(view).run_test(size=(80, 24)) as pilot:
        await settle(pilot, view)
        assert len([r for r in rows(view) if r]) == 10
        view.set_filter(LineFilter.build(include="odd"))
        await settle(pilot, view)
        shown = [r for r in rows(view) if r]
        assert shown == [
            "[worker-1] step 1 odd",
            "[worker-3] step 3 odd",
            "[launcher] step 5 odd",
            "[worker-3] step 7 odd",
            "[worker-1] step 9 odd",
        ]
        path = tmp_path / "out.log"
        assert view.save(path) == 5
        assert path.read_text().splitlines() == shown

        # new lines reach the filtered view too
        buf.extend([LogLine(T0 + 10**10, b"step 10 odd", ORIGINS[2]), LogLine(T0 + 10**10, b"x even", ORIGINS[2])])
        view.notify_appended()
        await settle(pilot, view)
        assert [r for r in rows(view) if r][-1] == "[worker-2] step 10 odd"

        view.show_timestamps = True
        await settle(pilot, view)
        shown = [r for r in rows(view) if r]
        assert shown[0] == "[worker-1] 00:00:01.000 step 1 odd"
        assert view.save(path) == 6
        assert path.read_text().splitlines() == shown
        assert "\x1b" not in path.read_text()

        view.set_filter(None)
        await settle(pilot, view)
        assert len([r for r in rows(view) if r]) == 12


async def test_capped_buffer_keeps_the_scrolled_view_in_place() -> None:
    buf = LineBuffer(100)
    buf.extend(LogLine(T0 + i, f"line {i}".encode(), ORIGINS[i % 4]) for i in range(100))
    view = LogView(buf, palette=PALETTE)
    async with ViewApp(view).run_test(size=(80, 24)) as pilot:
        await settle(pilot, view)
        await pilot.press("pageup")
        await settle(pilot, view)
        assert not view.tail
        first = rows(view)[0]
        buf.extend(LogLine(T0 + 100 + i, f"line {100 + i}".encode(), ORIGINS[0]) for i in range(10))
        view.notify_appended()
        await settle(pilot, view)
        assert view.new_lines == 10
        assert rows(view)[0] == first  # the same line, though 10 lines were dropped in front of it
        assert buf[0].kind == "dropped"


def test_palette_from_theme() -> None:
    from themes.loader import DEFAULT_THEME, builtin_specs
    from themes.model import ColourMode, Theme

    spec = builtin_specs()[DEFAULT_THEME]
    pal = palette_from_theme(Theme.from_spec(spec))
    assert pal == list(spec.ranks)
    pal16 = palette_from_theme(Theme.from_spec(spec, ColourMode.ANSI16))
    assert pal16 and not any(c.startswith("ansi_") for c in pal16)
    LogView(ListSource(), palette=pal16)  # Rich understands every colour


async def test_attach_follows_an_engine_and_filters_through_its_views() -> None:
    from monitors.logs.engine import LogEngine, LogOptions

    engine = LogEngine(None, ("ns", "mpijob", "job"), None, options=LogOptions(cap=1000))  # type: ignore[arg-type]
    view = LogView(ListSource(), palette=PALETTE)
    async with ViewApp(view).run_test(size=(80, 24)) as pilot:
        view.attach(engine)
        engine._store([LogLine(T0 + i, f"m {i}".encode(), ORIGINS[i % 2]) for i in range(6)])  # the engine's path
        await settle(pilot, view)
        assert [r for r in rows(view) if r][-1] == "[worker-1] m 5"
        view.set_filter(LineFilter.build(ranks="worker-0"))
        await settle(pilot, view)
        assert [r for r in rows(view) if r] == ["[worker-0] m 0", "[worker-0] m 2", "[worker-0] m 4"]
        engine._store([LogLine(T0 + 9, b"m 6", ORIGINS[0]), LogLine(T0 + 9, b"m 7", ORIGINS[1])])
        await settle(pilot, view)
        assert [r for r in rows(view) if r][-1] == "[worker-0] m 6"
    assert not engine._subscribers  # unsubscribed on unmount
