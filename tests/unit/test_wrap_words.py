"""tui/cli/fitting.py: `ranks why`'s prose on a terminal (80 columns on a login node): wrapped at
spaces, each continuation two further in, a `command` in backquotes never cut."""

from __future__ import annotations

import pytest

from tui.cli.fitting import wrap_words

TEXT = ("train (PyTorchJob, project team-a) is Pending: needs 2 pods x 1 GPU; held by your interactive session hvd\n"
        "  held: your interactive session hvd (idle 3m, started 1h ago, 3 GPUs on gpu-node-01) holds what this "
        "job needs: `ranks delete hvd -p team-a` frees them\n"
        "  fit: each pod asks 1 GPU")


def test_piped_output_keeps_every_line_whole() -> None:
    assert wrap_words(TEXT, None) == TEXT


@pytest.mark.parametrize("room", [80, 50, 30])
def test_words_wrap_at_spaces_with_a_hanging_indent_and_commands_whole(room: int) -> None:
    lines = wrap_words(TEXT, room).split("\n")
    assert lines[0].startswith("train ") and lines[1].startswith("  ") and not lines[1].startswith("   ")
    assert all(len(ln) <= room for ln in lines if "`" not in ln), lines
    assert "`ranks delete hvd -p team-a`" in "\n".join(lines)  # on one line, as it runs pasted
    held = next(i for i, ln in enumerate(lines) if ln.startswith("  held: "))
    assert lines[held + 1].startswith("    ") and not lines[held + 1].startswith("     ")
    assert lines[-1] == "  fit: each pod asks 1 GPU"  # a line that fits is left as it is
    assert " ".join(TEXT.split()) == " ".join(" ".join(lines).split())  # every word, in order, whole


def test_a_command_wider_than_the_room_stands_alone() -> None:
    text = "  held: frees them: `ranks delete a-very-long-session-name -p a-long-project-name`, or wait"
    lines = wrap_words(text, 40).split("\n")
    assert "    `ranks delete a-very-long-session-name -p a-long-project-name`," in lines, lines
