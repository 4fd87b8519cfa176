"""A Secret created with stringData reads back as the API server stores it: base64 `data`, the
stringData gone (the v1 conversion merges it), through the official client and a real kubectl."""

from __future__ import annotations

import base64
import json

import pytest

pytestmark = pytest.mark.simcluster()


def test_string_data_is_stored_as_data(k8s, kubectl) -> None:
    client, api = k8s
    core = client.CoreV1Api(api)
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"},
            "data": {"KEEP": base64.b64encode(b"kept").decode()}, "stringData": {"TOKEN": "t0k en", "KEEP": "new"}}
    core.create_namespaced_secret("default", body)
    got = core.read_namespaced_secret("s1", "default")
    assert {k: base64.b64decode(v).decode() for k, v in got.data.items()} == {"KEEP": "new", "TOKEN": "t0k en"}
    assert got.string_data is None and got.type == "Opaque"
    raw = json.loads(kubectl.run("get", "secret", "s1", "-n", "default", "-o", "json").stdout)
    assert "stringData" not in raw and base64.b64decode(raw["data"]["TOKEN"]) == b"t0k en"
