"""monitors.exposition: the Prometheus text format parser used by the exporter-scrape fallback."""

from __future__ import annotations

import math

import pytest

from monitors.exposition import parse, parse_float, parse_sample_line

DCGM_TEXT = """\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-1",DCGM_FI_DRIVER_VERSION="550.54.15",container="pytorch",namespace="team-a",pod="mnist-worker-0"} 97
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-1",DCGM_FI_DRIVER_VERSION="550.54.15",container="pytorch",namespace="team-a",pod="mnist-worker-0"} 61234
"""


def test_dcgm_example_output() -> None:
    exp = parse(DCGM_TEXT)
    assert exp.skipped == 0
    assert exp.types == {"DCGM_FI_DEV_GPU_UTIL": "gauge", "DCGM_FI_DEV_FB_USED": "gauge"}
    assert exp.helps["DCGM_FI_DEV_FB_USED"] == "Framebuffer memory used (in MiB)."
    util, used = exp.samples
    assert util.name == "DCGM_FI_DEV_GPU_UTIL" and util.value == 97.0 and util.timestamp_ms is None
    assert util.labels["Hostname"] == "gpu-node-1"
    assert util.labels["modelName"] == "NVIDIA H100 80GB HBM3"
    assert (util.labels["namespace"], util.labels["pod"]) == ("team-a", "mnist-worker-0")
    assert list(util.labels)[:3] == ["gpu", "UUID", "pci_bus_id"]
    assert used.value == 61234.0
    assert [s.value for s in exp.by_name("DCGM_FI_DEV_FB_USED")] == [61234.0]


def test_escaped_label_values() -> None:
    s = parse_sample_line(r'm{a="say \"hi\"",b="C:\\dir\\x",c="two\nlines",d="keep \t"} 1')
    assert s.labels == {"a": 'say "hi"', "b": "C:\\dir\\x", "c": "two\nlines", "d": "keep \\t"}
    s = parse_sample_line('m{a="}{,=",b="x y"} 2')  # separators inside quotes are data
    assert s.labels == {"a": "}{,=", "b": "x y"} and s.value == 2.0


def test_help_escapes_and_other_comments() -> None:
    exp = parse("# HELP m line one\\nline two \\\\ end\n# just a comment\n# TYPE m counter\n# EOF\nm 3\n")
    assert exp.helps["m"] == "line one\nline two \\ end"
    assert exp.types["m"] == "counter"
    assert [s.value for s in exp.samples] == [3.0]
    assert exp.skipped == 0


@pytest.mark.parametrize(
    ("text", "check"),
    [
        ("NaN", math.isnan),
        ("+Inf", lambda v: v == math.inf),
        ("Inf", lambda v: v == math.inf),
        ("-Inf", lambda v: v == -math.inf),
        ("1e3", lambda v: v == 1000.0),
        ("-0.5", lambda v: v == -0.5),
        ("4294967295", lambda v: v == 4294967295.0),
        (".5", lambda v: v == 0.5),
    ],
)
def test_values(text: str, check) -> None:  # type: ignore[no-untyped-def]
    assert check(parse_float(text))
    assert check(parse_sample_line(f'x{{gpu="0"}} {text}').value)


def test_timestamps() -> None:
    exp = parse('a 1 1700000000123\nb{x="1"} NaN 1700000000000\nc 2 1700000000.5\n')
    assert [s.timestamp_ms for s in exp.samples] == [1700000000123, 1700000000000, 1700000000500]
    assert math.isnan(exp.samples[1].value)


def test_garbage_lines_are_skipped_not_fatal() -> None:
    text = "\n".join([
        "good 1",
        "garbage without value",
        "bad{a=unquoted} 1",
        'unterminated{a="x} 1',
        "novalue{}",
        "x 1 2 3",
        "y notanumber",
        "z 0x1F",
        '{"utf8.name",job="a"} 4',
        'dup{a="1",a="2"} 1',
        'trailing{a="1",} 5',
        "   ",
        "crlf 6\r",
        "\x00\x01binary",
        "last 7",
    ])
    exp = parse(text)
    got = {s.name: s.value for s in exp.samples}
    assert got == {"good": 1.0, "utf8.name": 4.0, "trailing": 5.0, "crlf": 6.0, "last": 7.0}
    assert exp.samples[1].labels == {"job": "a"}
    assert exp.skipped == 9
    assert exp.errors[0][0] == 2  # line numbers are kept for the first few


def test_bytes_and_no_labels() -> None:
    exp = parse(b"up 1\nm{} 2\n\xff\xfe 3\n")
    assert [(s.name, s.labels, s.value) for s in exp.samples] == [("up", {}, 1.0), ("m", {}, 2.0)]
    assert exp.skipped == 1


def test_parse_never_raises_on_random_input() -> None:
    import random

    rng = random.Random(7)
    alphabet = 'abc{}="\\, \n#\t019.+-NaInf'
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(80)))
        exp = parse(text)
        assert exp.skipped + len(exp.samples) <= text.count("\n") + 1
