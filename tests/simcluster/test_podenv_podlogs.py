"""Pure pieces of the kubelet: $(VAR) expansion, quantities, path rewriting, durations, CRI logs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from simcluster.node.podenv import (
    ContainerConfigError,
    PathRewriter,
    container_env,
    expand,
    expand_command,
    parse_quantity,
    resource_value,
)
from simcluster.node.podlogs import MAX_LINE, LogWriter, record_content, tail_offset
from simcluster.node.podstatus import go_duration, image_id, normalize_image

VARS = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}


@pytest.mark.parametrize(("value", "want"), [
    # cases from kubernetes third_party/forked/golang/expansion/expand_test.go
    ("$(VAR_A)", "A"),
    ("___$(VAR_B)___", "___B___"),
    ("$(VAR_A)-$(VAR_A)", "A-A"),
    ("$(VAR_A)-1", "A-1"),
    ("$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"),
    ("f000-$$VAR_A", "f000-$VAR_A"),
    ("foo\\$(VAR_C)bar", "foo\\Cbar"),
    ("foo\\\\$(VAR_C)bar", "foo\\\\Cbar"),
    ("$(VAR_REF)", "$(VAR_A)"),
    ("foo$$(VAR_C)bar", "foo$(VAR_C)bar"),
    ("$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"),
    ("$(VAR_EMPTY)", ""),
    ("$(NOPE)", "$(NOPE)"),
    ("$(VAR_A", "$(VAR_A"),
    ("$()", "$()"),
    ("$", "$"),
    ("$VAR_A", "$VAR_A"),
    ("foo$", "foo$"),
    ("$$", "$"),
    ("$$$$", "$$"),
    ("$$$$$(VAR_A)", "$$A"),
    ("$(VAR_A)$", "A$"),
])
def test_expand_matches_kubernetes(value: str, want: str) -> None:
    assert expand(value, VARS.get) == want


def test_container_env_order_and_errors() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {}, "status": {"podIP": "10.0.0.9"}}
    objs = {("configmaps", "cm"): {"data": {"A": "1", "B": "2"}}}

    def lookup(kind: str, name: str):
        return objs.get((kind, name))

    c = {"envFrom": [{"configMapRef": {"name": "cm"}}],
         "env": [{"name": "B", "value": "over-$(A)"}, {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
         "command": ["echo"], "args": ["$(B)", "$(IP)"]}
    env = container_env(pod, c, base={"HOME": "/h"}, services={}, lookup=lookup, allocatable={})
    assert env == {"HOME": "/h", "A": "1", "B": "over-1", "IP": "10.0.0.9"}
    assert expand_command(c, env) == ["echo", "over-1", "10.0.0.9"]
    bad = {"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "zz"}}}]}
    with pytest.raises(ContainerConfigError, match="couldn't find key zz in ConfigMap ns/cm"):
        container_env(pod, bad, base={}, services={}, lookup=lookup, allocatable={})
    with pytest.raises(ContainerConfigError, match='secret "s" not found'):
        container_env(pod, {"envFrom": [{"secretRef": {"name": "s"}}]}, base={}, services={}, lookup=lookup,
                      allocatable={})


def test_quantities_and_resource_fields() -> None:
    assert parse_quantity("500m") * 2 == 1
    assert parse_quantity("2Gi") == 2 * 1024**3
    assert parse_quantity("1e3") == 1000
    c = {"resources": {"limits": {"cpu": "250m"}, "requests": {"memory": "1Gi"}}}
    assert resource_value(c, "limits.cpu", None, {}) == "1"
    assert resource_value(c, "limits.cpu", "1m", {}) == "250"
    assert resource_value(c, "requests.memory", "1Mi", {}) == "1024"
    assert resource_value(c, "limits.memory", "1Gi", {"memory": "8Gi"}) == "8"  # unset limit: allocatable


def test_path_rewriter(tmp_path: Path) -> None:
    rw = PathRewriter(tmp_path, ["/etc/mpi", "/root/.ssh/", "/"])
    assert rw.rewrite("/etc/mpi/hostfile") == f"{tmp_path}/etc/mpi/hostfile"
    assert rw.rewrite("/etc/mpi") == f"{tmp_path}/etc/mpi"
    assert rw.rewrite("/etc/mpix") == "/etc/mpix"
    assert rw.rewrite("/etc/passwd") == "/etc/passwd"
    assert rw.rewrite("relative/etc/mpi") == "relative/etc/mpi"
    assert rw.rewrite("/root/.ssh:/usr/bin") == f"{tmp_path}/root/.ssh:/usr/bin"
    assert rw.rewrite("/etc/mpi/../../escape") == "/etc/mpi/../../escape"
    assert rw.rewrite(f"{tmp_path}/etc/mpi/x") == f"{tmp_path}/etc/mpi/x"


def test_go_duration_and_images() -> None:
    assert [go_duration(s) for s in (10, 20, 80, 300, 0.2, 1.5, 3600)] == [
        "10s", "20s", "1m20s", "5m0s", "200ms", "1.5s", "1h0m0s"]
    assert normalize_image("busybox") == "docker.io/library/busybox:latest"
    assert normalize_image("nvcr.io/nvidia/pytorch:24.01-py3") == "nvcr.io/nvidia/pytorch:24.01-py3"
    assert normalize_image("kubeflow/mpi-operator") == "docker.io/kubeflow/mpi-operator:latest"
    assert image_id("busybox").startswith("docker.io/library/busybox@sha256:")


async def test_log_writer_records_and_tail(tmp_path: Path) -> None:
    w = LogWriter(tmp_path / "c" / "0.log", flush_interval=0.01)
    changed = w.changed
    w.feed(1, b"one\ntw")
    w.feed(2, b"err\n")
    w.feed(1, b"o\n" + b"y" * (MAX_LINE + 10) + b"\n")
    w.feed(1, b"partial")
    await asyncio.wait_for(changed.wait(), 1)
    w.close()
    lines = (tmp_path / "c" / "0.log").read_bytes().split(b"\n")[:-1]
    assert [ln.split(b" ", 3)[1:3] for ln in lines] == [
        [b"stdout", b"F"], [b"stderr", b"F"], [b"stdout", b"F"], [b"stdout", b"P"], [b"stdout", b"F"],
        [b"stdout", b"P"]]
    text = b"".join(record_content(ln, False)[1] for ln in lines)
    assert text == b"one\nerr\ntwo\n" + b"y" * (MAX_LINE + 10) + b"\npartial"
    assert w.size == (tmp_path / "c" / "0.log").stat().st_size
    assert tail_offset(w.path, w.size, 1) == w.size - len(lines[-1]) - 1
    assert tail_offset(w.path, w.size, 100) == 0
    assert tail_offset(w.path, w.size, 0) == w.size
