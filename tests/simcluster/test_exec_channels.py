"""The remote-command wire format: subprotocol choice, frames, resize parsing, statuses, options."""

from __future__ import annotations

import base64
import json

import pytest
from multidict import MultiDict

from simcluster.node import exec_channels as ch


def test_negotiation_follows_the_clients_order():
    assert ch.negotiate(["v5.channel.k8s.io", "v4.channel.k8s.io"]).name == ch.V5
    assert ch.negotiate(["v4.channel.k8s.io"]).version == 4
    assert ch.negotiate(["x", "v4.base64.channel.k8s.io", "v5.channel.k8s.io"]).name == ch.V4_BASE64
    assert ch.negotiate(["base64.channel.k8s.io"]).binary is False
    assert ch.negotiate([]) is ch.NO_PROTOCOL
    with pytest.raises(ch.ProtocolError, match=r"requested protocol\(s\) are not supported: \[spdy\]"):
        ch.negotiate(["spdy"])
    assert ch.offered_protocols(["v5.channel.k8s.io, v4.channel.k8s.io", "channel.k8s.io"]) == [
        ch.V5, ch.V4, ch.V1,
    ]


def test_protocol_capabilities():
    v5, v4, v1 = ch.PROTOCOLS[ch.V5], ch.PROTOCOLS[ch.V4], ch.PROTOCOLS[ch.V1]
    assert v5.supports_close and v5.status_json and v5.translated
    assert not v4.supports_close and v4.status_json and not v4.translated
    assert not v1.supports_close and not v1.status_json


def test_binary_frames_and_v5_close():
    v5, v4 = ch.PROTOCOLS[ch.V5], ch.PROTOCOLS[ch.V4]
    assert ch.encode(v5, ch.STDOUT, b"hi") == b"\x01hi"
    assert ch.encode(v5, ch.STDOUT, b"") == b"\x01"
    assert ch.decode(v5, b"\x00abc") == ch.Frame(0, b"abc")
    assert ch.decode(v5, bytes([255, 0])) == ch.Frame(0, b"", close=True)
    assert ch.decode(v5, bytes([255, 0, 1])) is None  # malformed CLOSE
    # Before v5, 255 is just an (unknown) channel number.
    assert ch.decode(v4, bytes([255, 0])) == ch.Frame(255, b"\x00")
    assert ch.decode(v5, b"") is None


def test_base64_frames():
    b64 = ch.PROTOCOLS[ch.V4_BASE64]
    out = ch.encode(b64, ch.STDERR, b"\x00\xffdata")
    assert out[:1] == b"2" and base64.b64decode(out[1:]) == b"\x00\xffdata"
    assert ch.decode(b64, b"0" + base64.b64encode(b"ls\n")) == ch.Frame(0, b"ls\n")
    assert ch.decode(b64, b"4" + base64.b64encode(b'{"Width":1,"Height":2}')).channel == ch.RESIZE


def test_resize_parser_handles_split_packed_and_case():
    p = ch.ResizeParser()
    assert p.feed(b'{"Width":80,"Height":24}\n') == [(80, 24)]
    assert p.feed(b'{"Width":100,') == []
    assert p.feed(b'"Height":50}{"width":1,"height":2}') == [(100, 50), (1, 2)]
    assert p.feed(b'{"Width":-1,"Height":5}') == []  # out of range for uint16: ignored
    assert p.feed(b"garbage") == []
    assert p.feed(b'{"Width":7,"Height":8}') == [(7, 8)]


def test_status_payloads_match_the_real_wire_form():
    v5, v4, v1 = ch.PROTOCOLS[ch.V5], ch.PROTOCOLS[ch.V4], ch.PROTOCOLS[ch.V1]
    assert ch.status_payload(ch.success_status(), v5) == b'{"metadata":{},"status":"Success"}'
    assert ch.status_payload(ch.exit_status(3, ["sh", "-c", "exit 3"], v4), v4) == (
        b'{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: '
        b'error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode",'
        b'"details":{"causes":[{"reason":"ExitCode","message":"3"}]}}'
    )
    translated = ch.exit_status(3, ["sh", "-c", "exit 3"], v5)
    assert translated["message"] == (
        "command terminated with non-zero exit code: command terminated with exit code 3"
    )
    assert ch.exit_code_of(translated) == 3
    assert ch.exit_code_of(ch.success_status()) == 0
    # Legacy protocols carry plain error text, and nothing on success.
    assert ch.status_payload(ch.success_status(), v1) is None
    assert ch.status_payload(ch.internal_error("boom"), v1) == b"Internal error occurred: boom"


def test_runtime_errors_are_wrapped_once_more_by_the_translator():
    v5, v4 = ch.PROTOCOLS[ch.V5], ch.PROTOCOLS[ch.V4]
    direct = ch.runtime_error("error executing command in container: x", v4)
    assert direct["message"] == "Internal error occurred: error executing command in container: x"
    assert direct["code"] == 500 and direct["reason"] == "InternalError"
    wrapped = ch.runtime_error("error executing command in container: x", v5)
    assert wrapped["message"].startswith("Internal error occurred: Internal error occurred: error executing")
    assert json.loads(ch.status_payload(wrapped, v5) or b"")["details"]["causes"][0]["message"] == (
        direct["message"]
    )
    assert ch.exit_code_of(wrapped) is None


def test_exec_options_from_query():
    q = MultiDict([("command", "sh"), ("command", "-c"), ("command", "echo a b"), ("container", "c"),
                   ("stdin", "true"), ("stdout", "1"), ("stderr", "true"), ("tty", "false")])
    o = ch.ExecOptions.from_query(q)
    assert o.command == ["sh", "-c", "echo a b"] and o.container == "c"
    assert (o.stdin, o.stdout, o.stderr, o.tty) == (True, True, True, False)
    assert o.first_channel == ch.STDOUT
    tty = ch.ExecOptions.from_query(MultiDict([("command", "sh"), ("stderr", "true"), ("tty", "true")]))
    assert tty.tty and not tty.stderr  # a terminal merges stderr into stdout
    assert tty.first_channel == ch.ERROR
    err_only = ch.ExecOptions.from_query(MultiDict([("command", "x"), ("stderr", "True")]))
    assert err_only.first_channel == ch.STDERR


def test_container_resolution_messages():
    def pod(*names: str, init: tuple[str, ...] = ()) -> dict:
        return {"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": n} for n in names], "initContainers": [{"name": n} for n in init]}}

    assert ch.resolve_container(pod("main"), "") == ("main", None)
    assert ch.resolve_container(pod("a", "b"), "") == (
        None, "a container name must be specified for pod p, choose one of: [a b]")
    assert ch.resolve_container(pod("a", "b", init=("i",)), "")[1] == (
        "a container name must be specified for pod p, choose one of: [a b] "
        "or one of the init containers: [i]")
    assert ch.resolve_container(pod("a", "b"), "b") == ("b", None)
    assert ch.resolve_container(pod("a", init=("i",)), "i") == ("i", None)
    assert ch.resolve_container(pod("a"), "zz") == (None, "container zz is not valid for pod p")
    assert ch.resolve_container(pod(), "") == (None, "a container name must be specified for pod p")
