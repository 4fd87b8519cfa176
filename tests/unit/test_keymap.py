"""The binding catalogue, key syntax, overrides, conflicts, and remapping in a real Textual app."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.dom import DOMNode
from textual.widgets import Static

from tui.keymap import (
    BY_ID,
    CATALOGUE,
    SCOPES,
    Conflict,
    Keymap,
    KeymapError,
    character_key,
    default_bindings,
    normalise_key,
    parse_keys,
)

REQUIRED_IDS = {
    "quit", "help", "filter", "command_palette", "logs", "shell", "describe", "back", "open", "sort",
    "toggle_mine", "tail", "wrap", "timestamps", "save_logs",
}



def test_character_key_names_as_textual_events_do() -> None:
    assert [character_key(c) for c in "aO7/?-+ _"] == [
        "a", "O", "7", "slash", "question_mark", "minus", "plus", "space", "underscore"]


def test_catalogue() -> None:
    assert set(BY_ID) >= REQUIRED_IDS
    assert len(BY_ID) == len(CATALOGUE)
    km = Keymap()
    assert km.conflicts() == []
    for spec in CATALOGUE:
        assert spec.scope in SCOPES and spec.description and spec.action
        assert km.keys(spec.id) == parse_keys(spec.key)  # defaults are valid, canonical keys
        assert ",".join(km.keys(spec.id)) == spec.key, spec
    for scope in SCOPES:
        bindings = default_bindings(scope)
        assert bindings and all(isinstance(b, Binding) and b.id for b in bindings)
        assert [b.id for b in bindings] == [s.id for s in CATALOGUE if s.scope == scope]
    with pytest.raises(ValueError, match="unknown scope"):
        default_bindings("nowhere")


@pytest.mark.parametrize(("key", "normal"), [
    ("q", "q"),
    ("?", "question_mark"),
    ("/", "slash"),
    (",", "comma"),
    (" ", "space"),
    ("ctrl+/", "ctrl+slash"),
    ("ctrl++", "ctrl+plus"),
    ("ctrl+.", "ctrl+full_stop"),
    ("shift+o", "O"),
    ("O", "O"),
    ("shift+ctrl+Up", "ctrl+shift+up"),
    ("ctrl+shift+meta+x", "ctrl+meta+shift+x"),
    ("ctrl+A", "ctrl+a"),
    ("F5", "f5"),
    ("f24", "f24"),
    ("Enter", "enter"),
    ("pageup", "pageup"),
    ("question_mark", "question_mark"),
    ("super+k", "super+k"),
    ("alt+left", "alt+left"),
    ("é", "é"),
])
def test_normalise_key(key: str, normal: str) -> None:
    assert normalise_key(key) == normal


@pytest.mark.parametrize(("key", "message"), [
    ("esc", "unknown key name 'esc' in 'esc' (did you mean 'escape'?)"),
    ("pgup", "did you mean 'pageup'?"),
    ("ctrl+", "has no key after '+'"),
    ("crtl+a", "unknown modifier 'crtl' in 'crtl+a' (did you mean 'ctrl'?)"),
    ("ctrl+ctrl+a", "repeated modifier"),
    ("\x01", "not printable"),
    ("", "empty key"),
    ("solidus", "unknown key name 'solidus'"),
    ("SLASH", "did you mean 'slash'?"),
    ("f99", "unknown key name 'f99'"),
])
def test_invalid_keys(key: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        normalise_key(key)
    assert message in str(info.value)


def test_parse_keys_forms() -> None:
    assert parse_keys("q,ctrl+q") == ("q", "ctrl+q")
    assert parse_keys(["q", "ctrl+q,f10"]) == ("q", "ctrl+q", "f10")
    assert parse_keys(",") == ("comma",)
    assert parse_keys("q,q") == ("q",)
    with pytest.raises(ValueError, match="expected a key string"):
        parse_keys(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty key"):
        parse_keys("q,,x")


def test_overrides_apply_to_bindings_and_textual_keymap() -> None:
    km = Keymap({"quit": "ctrl+q", "logs": ["L", "f3"], "filter": "ctrl+f"})
    assert km.keys("quit") == ("ctrl+q",)
    assert km.keys("help") == ("question_mark",)  # untouched default
    table = {b.id: b for b in km.bindings("table")}
    assert table["logs"].key == "L,f3" and table["logs"].action == "logs" and table["logs"].description == "Logs"
    assert {b.id: b.key for b in km.bindings("global")}["quit"] == "ctrl+q"
    assert km.textual_keymap() == {"quit": "ctrl+q", "logs": "L,f3", "filter": "ctrl+f"}
    assert km.display("help") == "?" and km.display("logs") == "L/f3" and km.display("back") == "esc"


def test_keymap_errors_name_each_binding() -> None:
    with pytest.raises(KeymapError) as info:
        Keymap({"quitt": "x", "help": "esc", "logs": "l"})
    assert info.value.problems == [
        ("quitt", "unknown binding id 'quitt' (did you mean 'quit'?)"),
        ("help", "unknown key name 'esc' in 'esc' (did you mean 'escape'?)"),
    ]


def test_conflicts() -> None:
    # a table key that is also a global key: both active on a list screen
    assert Keymap({"describe": "q"}).conflicts() == [Conflict("q", ("quit", "describe"))]
    # two table bindings on one key
    [conflict] = Keymap({"logs": "d"}).conflicts()
    assert conflict.key == "d" and set(conflict.ids) == {"describe", "logs"}
    assert str(conflict) == "key 'd' is bound to 'describe' (table), 'logs' (table)"
    # different screens may share keys: a table key and a logs key
    assert Keymap({"tail": "d"}).conflicts() == []
    # keys Textual reserves
    [reserved] = Keymap({"open": "tab"}).conflicts()
    assert reserved.key == "tab" and reserved.ids == ("open", "focus next (Textual)")
    assert Keymap({"logs": "d"}).conflicts_of("describe") and not Keymap({"logs": "d"}).conflicts_of("quit")


class KeyApp(App[None]):
    """A tiny app whose bindings come from the catalogue (by id)."""

    BINDINGS = default_bindings("global")

    def __init__(self, keymap: Keymap | None = None) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.keymap_to_set = keymap.textual_keymap() if keymap else {}

    def compose(self) -> ComposeResult:
        yield Static("keys")

    def on_mount(self) -> None:
        if self.keymap_to_set:
            self.set_keymap(self.keymap_to_set)

    def action_help(self) -> None:
        self.calls.append("help")

    def action_filter(self) -> None:
        self.calls.append("filter")

    def action_refresh(self) -> None:
        self.calls.append("refresh")

    def action_back(self) -> None:
        self.calls.append("back")


def make_app(km: Keymap, use_set_keymap: bool) -> KeyApp:
    if use_set_keymap:  # default bindings (with ids), Textual substitutes the user's keys
        return KeyApp(km)

    class RemappedApp(KeyApp, inherit_bindings=False):  # else KeyApp's defaults stay bound too
        BINDINGS = km.bindings("global")

    return RemappedApp()


@pytest.mark.parametrize("use_set_keymap", [True, False], ids=["set_keymap", "bindings"])
async def test_remapped_keys_work_in_textual(use_set_keymap: bool) -> None:
    km = Keymap({"help": "f1,h", "filter": "ctrl+f", "refresh": "?"})
    app = make_app(km, use_set_keymap)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f1", "h", "ctrl+f", "slash", "question_mark", "ctrl+r", "escape")
        await pilot.pause()
    assert app.calls == ["help", "help", "filter", "refresh", "back"]


async def test_default_keys_work_in_textual() -> None:
    app = KeyApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark", "slash", "ctrl+r", "escape")
        await pilot.pause()
        assert app.return_code is None
        await pilot.press("q")
        await pilot.pause()
        assert app.return_code == 0  # "q" quit the app
    assert app.calls == ["help", "filter", "refresh", "back"]


def test_every_id_is_bound_where_its_scope_says() -> None:
    """Remapping an id changes a key that acts: each id is bound by the app or a screen (global), by
    a screen with lists or a list widget (table), by the logs screen or its view (logs)."""
    import tui.app
    from tui.screens.base import RanksScreen
    from tui.screens.cluster import ClusterScreen, NodePodsScreen
    from tui.screens.lists import ListScreen
    from tui.screens.logs import LogsScreen
    from tui.screens.workload import WorkloadScreen
    from tui.widgets.event_list import EventList
    from tui.widgets.keyed_table import KeyedTable
    from tui.widgets.log_view import LogView
    from tui.widgets.picker import Picker

    homes: dict[str, tuple[type, ...]] = {
        "global": (tui.app.RanksApp, RanksScreen),
        "table": (ListScreen, WorkloadScreen, ClusterScreen, NodePodsScreen, KeyedTable, EventList, Picker),
        "logs": (LogsScreen, LogView),
    }

    def dashboard_classes(base: type) -> Iterator[type]:
        for sub in base.__subclasses__():
            if sub.__module__.startswith("tui."):
                yield sub
            yield from dashboard_classes(sub)

    bound_by: dict[str, set[type]] = {}
    for cls in set(dashboard_classes(DOMNode)):
        for b in cls.__dict__.get("BINDINGS", ()):
            if isinstance(b, Binding) and b.id:
                bound_by.setdefault(b.id, set()).add(cls)
    nowhere = [f"{s.id} ({s.scope})" for s in CATALOGUE
               if not any(issubclass(cls, homes.get(s.scope, ())) for cls in bound_by.get(s.id, ()))]
    assert nowhere == [], "bound by no screen of their scope"
    assert set(homes) == set(SCOPES)
    assert tui.app.RanksApp.bound_ids() == set(BY_ID)  # the help lists every id


def test_a_retired_id_in_a_keymap_is_told_to_go() -> None:
    with pytest.raises(KeymapError) as info:
        Keymap({"detach": "ctrl+x", "yaml": "Y"})
    assert info.value.problems == [
        ("detach", "binding id 'detach' was removed (the shell never had it): delete this line"),
        ("yaml", "binding id 'yaml' was removed (the describe view never had it): delete this line"),
    ]
