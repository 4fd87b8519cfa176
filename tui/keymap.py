"""The binding catalogue: every binding of the dashboard has an id, a default key and a scope.

A keymap (the ``[keymap]`` table of the configuration: binding id -> key string, or list of key
strings) remaps bindings by id. Keys use Textual's syntax: modifiers ``ctrl``, ``shift``, ``alt``,
``meta``, ``super``, ``hyper`` joined with ``+`` to a key name (``f5``, ``enter``, ``pageup``,
``slash``...) or one printable character (``?``, ``/``; normalised to Textual's names such as
``question_mark``); several keys are separated by commas (``"q,ctrl+q"``).

Use: screens declare ``BINDINGS = default_bindings("table")`` (Bindings carry their ids), and the
app calls ``app.set_keymap(keymap.textual_keymap())`` so Textual substitutes the user's keys; or
build bindings with the overrides already applied with ``keymap.bindings(scope)``.

Scopes: ``global`` bindings belong to the app or to every screen, so they conflict with any scope;
``table`` (the screens with lists: projects, workloads, a workload's ranks and events, cluster load,
a node's pods; its ``row_*`` ids, `LIST_BINDING_IDS`, move the cursor of every list and are bound by
the list widgets) and ``logs`` (the merged logs; the describe view's YAML takes its ``top`` and
``bottom``) are separate screens and conflict only with themselves and global. Every id is bound by
a screen or widget of its scope (tests/unit/test_keymap.py checks it); an id that acted nowhere was
removed, and a configuration naming one is told so (`RETIRED_IDS`).
"""

from __future__ import annotations

import difflib
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from textual.binding import Binding
from textual.keys import (
    ASCII_KEY_NAMES,
    KEY_NAME_REPLACEMENTS,
    KEY_TO_UNICODE_NAME,
    REPLACED_KEYS,
    Keys,
    format_key,
)

SCOPES = ("global", "table", "logs")
MODIFIERS = ("alt", "ctrl", "hyper", "meta", "shift", "super")
RESERVED_KEYS: Mapping[str, str] = {
    "tab": "focus next (Textual)",
    "shift+tab": "focus previous (Textual)",
    "ctrl+c": "copy / interrupt (Textual)",
}

_NAMED_KEYS = frozenset(
    {k.value.rpartition("+")[2] for k in Keys if not k.value.startswith("<")}
    | {f"f{i}" for i in range(1, 36)}
    | {"caps_lock", "scroll_lock", "num_lock", "print_screen", "pause", "menu", "space", "newline"}
) - {"ctrl-at"}


@dataclass(frozen=True)
class BindingSpec:
    id: str
    key: str
    """Default key(s), comma separated, Textual syntax."""
    action: str
    description: str
    scope: str = "global"
    show: bool = True
    priority: bool = False


CATALOGUE: tuple[BindingSpec, ...] = (
    # global: every screen
    BindingSpec("quit", "q", "quit", "Quit"),
    BindingSpec("help", "question_mark", "help", "Help"),
    BindingSpec("command_palette", "colon", "command_palette", "Commands"),
    BindingSpec("command_palette_alt", "ctrl+p", "command_palette", "Commands", show=False),
    BindingSpec("back", "escape", "back", "Back"),
    BindingSpec("filter", "slash", "filter", "Filter"),
    BindingSpec("refresh", "ctrl+r", "refresh", "Refresh", show=False),
    BindingSpec("projects", "p", "projects", "Projects", show=False),
    BindingSpec("theme", "ctrl+t", "change_theme", "Theme", show=False),
    BindingSpec("cluster", "c", "cluster", "Cluster load"),
    # table: project, workload and rank lists
    BindingSpec("open", "enter", "open", "Open", "table"),
    BindingSpec("describe", "d", "describe", "Describe", "table"),
    BindingSpec("logs", "l", "logs", "Logs", "table"),
    BindingSpec("shell", "s", "shell", "Shell", "table"),
    BindingSpec("exec_all", "x", "exec_all", "Exec on all ranks", "table", show=False),
    BindingSpec("delete", "ctrl+d", "delete", "Delete", "table", show=False),
    BindingSpec("suspend", "z", "suspend", "Suspend / resume", "table", show=False),
    BindingSpec("convert", "t", "convert", "Convert to training job", "table", show=False),
    BindingSpec("debug", "D", "debug", "Debug in a session", "table", show=False),
    BindingSpec("stacks", "S", "stacks", "Stacks of every rank", "table", show=False),
    BindingSpec("ports", "P", "ports", "Ports of every rank (forward one)", "table", show=False),
    BindingSpec("new_session", "n", "new_session", "New session", "table", show=False),
    BindingSpec("sort", "o", "sort", "Sort", "table"),
    BindingSpec("sort_reverse", "O", "sort_reverse", "Reverse sort", "table", show=False),
    BindingSpec("toggle_mine", "m", "toggle_mine", "Only mine", "table"),
    BindingSpec("all_projects", "a", "all_projects", "All projects", "table", show=False),
    BindingSpec("expand", "space", "expand", "A node's GPUs", "table", show=False),
    BindingSpec("next_tab", "right", "next_tab", "Next tab", "table", show=False, priority=True),
    # every list's cursor (tables, the Events tab, pickers): the list widget binds them
    BindingSpec("row_down", "j,down", "cursor_down", "Next row", "table", show=False),
    BindingSpec("row_up", "k,up", "cursor_up", "Previous row", "table", show=False),
    BindingSpec("row_first", "g,home", "first", "First row", "table", show=False),
    BindingSpec("row_last", "G,end", "last", "Last row", "table", show=False),
    BindingSpec("event_message", "v", "choose('message')", "Whole message", "table"),  # the Events tab
    BindingSpec("previous_tab", "left", "previous_tab", "Previous tab", "table", show=False, priority=True),
    # logs: merged rank logs
    BindingSpec("tail", "f", "tail", "Follow", "logs"),
    BindingSpec("wrap", "w", "wrap", "Wrap", "logs"),
    BindingSpec("timestamps", "t", "timestamps", "Timestamps", "logs"),
    BindingSpec("save_logs", "ctrl+s", "save_logs", "Save", "logs"),
    BindingSpec("select_ranks", "r", "select_ranks", "Ranks", "logs"),
    BindingSpec("previous_logs", "P", "previous_logs", "Previous run", "logs", show=False),
    BindingSpec("next_match", "n", "next_match", "Next match", "logs", show=False),
    BindingSpec("prev_match", "N", "prev_match", "Previous match", "logs", show=False),
    BindingSpec("top", "g,home", "scroll_top", "Top", "logs", show=False),
    BindingSpec("bottom", "G,end", "scroll_bottom", "Bottom", "logs", show=False),
)
# ids of earlier versions that no screen ever bound (remapping them did nothing): a configuration
# that names one is told to drop it
RETIRED_IDS: Mapping[str, str] = {
    "yaml": "the describe view", "events": "the describe view", "details_logs": "the describe view",
    "details_shell": "the describe view", "detach": "the shell",
}

LIST_BINDING_IDS = ("row_down", "row_up", "row_first", "row_last")  # bound by the list widgets themselves

BY_ID: Mapping[str, BindingSpec] = {spec.id: spec for spec in CATALOGUE}
assert len(BY_ID) == len(CATALOGUE), "binding ids must be unique"
assert all(spec.scope in SCOPES for spec in CATALOGUE)


class KeymapError(ValueError):
    """Problems in a keymap: ``problems`` is a list of (binding id or "", one-line message)."""

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(f"{bid}: {msg}" if bid else msg for bid, msg in self.problems))


@dataclass(frozen=True)
class Conflict:
    key: str
    ids: tuple[str, ...]

    def __str__(self) -> str:
        names = ", ".join(f"{i!r} ({BY_ID[i].scope})" if i in BY_ID else repr(i) for i in self.ids)
        return f"key {self.key!r} is bound to {names}"


def character_key(char: str) -> str:
    """Textual's key name for one printable character, as its key events carry it: letters and
    digits as they are, others by their Unicode name (``/`` -> ``slash``, ``?`` ->
    ``question_mark``), with Textual's replacements (``-`` -> ``minus``)."""
    if char.isalnum():
        key = char
    else:
        try:
            key = unicodedata.name(char).lower().replace("-", "_").replace(" ", "_")
        except ValueError:
            key = ASCII_KEY_NAMES.get(char, char)
    return KEY_NAME_REPLACEMENTS.get(key, key)


def _is_character_name(name: str) -> bool:
    """`name` is Textual's name for a printable character (``slash``, ``question_mark``...)."""
    original = REPLACED_KEYS.get(name, name)
    try:
        char = unicodedata.lookup(KEY_TO_UNICODE_NAME.get(original, original.replace("_", " ").upper()))
    except KeyError:
        return False
    return len(char) == 1 and char.isprintable() and character_key(char) == name


def _hint(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def normalise_key(key: str) -> str:
    """One key in Textual's canonical form (modifiers sorted, characters named); ValueError if invalid."""
    raw = key
    if key == " ":
        return "space"
    key = key.strip()
    if not key:
        raise ValueError("empty key")
    if len(key) == 1:
        if not key.isprintable():
            raise ValueError(f"key {raw!r} is not printable")
        return "space" if key == " " else character_key(key)
    *mods, base = key.split("+")
    if base == "" and mods and mods[-1] == "":  # "ctrl++": the plus key
        mods, base = mods[:-1], "+"
    if not base:
        raise ValueError(f"key {raw!r} has no key after '+'")
    mods = [m.lower() for m in mods]
    for mod in mods:
        if mod not in MODIFIERS:
            raise ValueError(f"unknown modifier {mod!r} in {raw!r}{_hint(mod, MODIFIERS)} "
                             f"(modifiers: {', '.join(MODIFIERS)})")
    if len(set(mods)) != len(mods):
        raise ValueError(f"repeated modifier in {raw!r}")
    if mods == ["shift"] and len(base) == 1 and base.isalpha():
        return base.upper()  # terminals send shift+o as "O"
    if len(base) == 1:
        if not base.isprintable() or base == " ":
            base = "space" if base == " " else base
            if base != "space":
                raise ValueError(f"key {raw!r} is not printable")
        else:
            base = character_key(base.lower() if mods and base.isalpha() else base)
    elif base.lower() in _NAMED_KEYS:
        base = base.lower()
    elif not _is_character_name(base):
        names = sorted(_NAMED_KEYS | {"question_mark", "slash", "comma", "full_stop", "minus", "plus"})
        raise ValueError(f"unknown key name {base!r} in {raw!r}{_hint(base.lower(), names)}")
    return "+".join([*sorted(mods), base])


def parse_keys(value: str | Sequence[str]) -> tuple[str, ...]:
    """A key string (``"q,ctrl+q"``) or a list of keys -> normalised keys, duplicates removed."""
    if isinstance(value, str):
        parts = value.split(",") if len(value.strip()) > 1 else [value]
    elif isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        parts = []
        for item in value:
            parts.extend(item.split(",") if len(item.strip()) > 1 else [item])
    else:
        raise ValueError(f"expected a key string or a list of key strings (got {value!r})")
    keys = tuple(dict.fromkeys(normalise_key(p) for p in parts))
    if not keys:
        raise ValueError("no key given")
    return keys


def _scopes_overlap(a: str, b: str) -> bool:
    return a == b or "global" in (a, b)


class Keymap:
    """The catalogue with the user's overrides applied (validated on construction)."""

    def __init__(self, overrides: Mapping[str, str | Sequence[str]] | None = None,
                 catalogue: Sequence[BindingSpec] = CATALOGUE) -> None:
        self.catalogue = tuple(catalogue)
        self.by_id = {spec.id: spec for spec in self.catalogue}
        self.overrides: dict[str, tuple[str, ...]] = {}
        problems: list[tuple[str, str]] = []
        for bid, value in (overrides or {}).items():
            if bid not in self.by_id:
                if bid in RETIRED_IDS:
                    problems.append((bid, f"binding id {bid!r} was removed ({RETIRED_IDS[bid]} never had it): "
                                          "delete this line"))
                else:
                    problems.append((bid, f"unknown binding id {bid!r}{_hint(bid, self.by_id)}"))
                continue
            try:
                self.overrides[bid] = parse_keys(value)
            except ValueError as exc:
                problems.append((bid, str(exc)))
        if problems:
            raise KeymapError(problems)

    def keys(self, binding_id: str) -> tuple[str, ...]:
        if binding_id in self.overrides:
            return self.overrides[binding_id]
        return parse_keys(self.by_id[binding_id].key)

    def display(self, binding_id: str, *, ascii: bool = False) -> str:
        """The keys as shown in help and footers (``?``, ``ctrl+p``, ``esc``), joined with ``/``;
        `ascii`: names instead of symbols that need Unicode (``enter``, not ``⏎``)."""
        shown = (format_key(k) for k in self.keys(binding_id))
        if ascii:
            shown = (d if d.isascii() else k for d, k in zip(shown, self.keys(binding_id), strict=True))
        return "/".join(shown)

    def bindings(self, scope: str) -> list[Binding]:
        """Textual `Binding`s (with ids) for `scope`, the overrides applied."""
        return [
            Binding(",".join(self.keys(s.id)), s.action, s.description, show=s.show, priority=s.priority, id=s.id)
            for s in self.catalogue if s.scope == scope
        ]

    def textual_keymap(self) -> dict[str, str]:
        """The overrides as `App.set_keymap` takes them (binding id -> comma separated keys)."""
        return {bid: ",".join(keys) for bid, keys in self.overrides.items()}

    def conflicts(self) -> list[Conflict]:
        """Keys bound twice where both bindings can be active, and keys Textual reserves."""
        by_key: dict[str, list[BindingSpec]] = defaultdict(list)
        for spec in self.catalogue:
            for key in self.keys(spec.id):
                by_key[key].append(spec)
        out: list[Conflict] = []
        for key, specs in by_key.items():
            ids: list[str] = []
            for i, first in enumerate(specs):
                for second in specs[i + 1:]:
                    if _scopes_overlap(first.scope, second.scope):
                        ids.extend(x for x in (first.id, second.id) if x not in ids)
            if ids:
                out.append(Conflict(key, tuple(ids)))
            if key in RESERVED_KEYS:
                out.append(Conflict(key, (*[s.id for s in specs], RESERVED_KEYS[key])))
        return [c for c in out if len(c.ids) > 1]

    def conflicts_of(self, binding_id: str) -> list[Conflict]:
        return [c for c in self.conflicts() if binding_id in c.ids]


def default_bindings(scope: str) -> list[Binding]:
    """The default `Binding`s of `scope`, with ids (for a screen's ``BINDINGS``)."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r} (scopes: {', '.join(SCOPES)})")
    return Keymap().bindings(scope)
