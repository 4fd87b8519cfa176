"""Pod logs from real processes: the CRI files and the `pods/log` endpoint with the official client
and kubectl."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from simcluster.node.podlogs import format_rfc3339nano, parse_rfc3339nano
from tests.waiting import wait_for

pytestmark = pytest.mark.simcluster(components=("kubelet",))

NODE = "node-a"


def pod(name: str, script: str, *, restart: str = "Never", containers: list[dict[str, Any]] | None = None,
        **spec: Any) -> dict[str, Any]:
    cs = containers or [{"name": "main", "image": "busybox", "command": ["sh", "-c", script]}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": NODE, "restartPolicy": restart, "containers": cs, **spec}}


@pytest.fixture
def core(k8s):
    client, api = k8s
    core = client.CoreV1Api(api)
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    return core


def phase(core, name: str) -> str | None:
    return core.read_namespaced_pod(name, "default").status.phase


def run_to_end(core, body: dict[str, Any]) -> str:
    core.create_namespaced_pod("default", body)
    name = body["metadata"]["name"]
    wait_for(lambda: phase(core, name) in ("Succeeded", "Failed"))
    return name


def raw_log(core, name: str, **kw: Any) -> bytes:
    resp = core.read_namespaced_pod_log(name, "default", _preload_content=False, **kw)
    assert resp.headers["Content-Type"] == "text/plain"
    return resp.data


def get_log(k8s, name: str, **query: str) -> tuple[int, dict[str, str], bytes]:
    """A raw GET of the log endpoint (the official client has no sinceTime parameter)."""
    _, api = k8s
    method, url, headers, _, _ = api.param_serialize(
        "GET", "/api/v1/namespaces/{namespace}/pods/{name}/log",
        path_params={"namespace": "default", "name": name}, query_params=list(query.items()),
        auth_settings=["BearerToken"])
    resp = api.call_api(method, url, headers)
    return resp.status, dict(resp.getheaders()), resp.read()


def api_error(fn: Callable[[], Any]) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as exc:
        fn()
    return exc.value.status, json.loads(exc.value.body)


def test_timestamps_parse_and_increase(core):
    name = run_to_end(core, pod("ts", "i=0; while [ $i -lt 300 ]; do echo line $i; echo err $i >&2; i=$((i+1)); done"))
    text = raw_log(core, name, timestamps=True).decode()
    lines = text.splitlines()
    assert len(lines) == 600
    stamps = []
    for line in lines:
        ts, _, rest = line.partition(" ")
        assert rest.startswith(("line ", "err "))
        parsed = datetime.fromisoformat(ts.replace("Z", "+00:00")) if "." not in ts else None
        assert parsed is None or parsed.tzinfo is not None
        assert ts.endswith("Z") and (("." not in ts) or not ts.split(".")[1][:-1].endswith("0"))
        stamps.append(parse_rfc3339nano(ts))
    assert all(a < b for a, b in itertools.pairwise(stamps))
    now = time.time_ns()
    assert now - 60e9 < stamps[0] <= stamps[-1] <= now
    # stdout and stderr are both there, each in order
    outs = [int(x.split()[-1]) for x in lines if x.split(" ", 1)[1].startswith("line")]
    assert outs == list(range(300))
    assert raw_log(core, name).decode().count("\n") == 600


def test_cri_files_on_disk(core, simcluster):
    name = run_to_end(core, pod("cri", "echo out; echo err >&2"))

    def files() -> list[str]:
        rt = simcluster.sim.kubelet.runtime("default", name)
        return sorted(str(p) for p in rt.log_dir.rglob("*.log"))

    paths = simcluster.call(files)
    assert len(paths) == 1 and paths[0].endswith("/main/0.log")
    records = Path(paths[0]).read_text().splitlines()
    assert sorted(r.split(" ", 1)[1] for r in records) == ["stderr F err", "stdout F out"]


def test_long_and_partial_lines(core):
    script = "head -c 40000 /dev/zero | tr '\\0' x; echo; printf tail"
    name = run_to_end(core, pod("long", script))
    assert raw_log(core, name) == b"x" * 40000 + b"\ntail"
    stamped = raw_log(core, name, timestamps=True).decode()
    # 16 KiB records, each with its timestamp, joined back without newlines
    pieces = stamped.split("Z ")
    assert len(pieces) == 5  # 3 records for the long line, 1 for the partial "tail"
    assert raw_log(core, name, tail_lines=1) == b"tail"


def test_tail_limit_since(core, k8s):
    name = run_to_end(core, pod("opts", "i=1; while [ $i -le 100 ]; do echo $i; i=$((i+1)); done; "
                                        "sleep 1.3; echo late"))
    assert raw_log(core, name, tail_lines=3) == b"99\n100\nlate\n"
    assert raw_log(core, name, tail_lines=0) == b""
    assert raw_log(core, name, tail_lines=1000).count(b"\n") == 101
    assert raw_log(core, name, limit_bytes=10) == b"1\n2\n3\n4\n5\n"
    assert raw_log(core, name, limit_bytes=11) == b"1\n2\n3\n4\n5\n6"
    stamped = raw_log(core, name, timestamps=True).decode().splitlines()
    late_ns = parse_rfc3339nano(stamped[-1].split(" ")[0])
    first_ns = parse_rfc3339nano(stamped[0].split(" ")[0])
    since = datetime.fromtimestamp(late_ns // 1_000_000_000, UTC)  # the API server keeps seconds
    assert since.timestamp() * 1e9 > first_ns
    status, headers, got = get_log(k8s, name, sinceTime=since.strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert status == 200 and headers["Content-Type"] == "text/plain"
    assert got.endswith(b"late\n") and not got.startswith(b"1\n")
    assert raw_log(core, name, since_seconds=3600).count(b"\n") == 101
    assert raw_log(core, name, tail_lines=2, timestamps=True).decode().splitlines()[1] == stamped[-1]


def test_follow_streams_new_lines_and_ends_with_container(core):
    core.create_namespaced_pod("default", pod(
        "follow", "i=0; while [ $i -lt 10 ]; do echo tick $i; i=$((i+1)); sleep 0.15; done"))
    wait_for(lambda: phase(core, "follow") == "Running")
    resp = core.read_namespaced_pod_log("follow", "default", follow=True, _preload_content=False)
    assert resp.headers["Content-Type"] == "text/plain"
    assert resp.headers.get("Transfer-Encoding") == "chunked"
    arrivals: list[tuple[float, bytes]] = []
    buf = b""
    for chunk in resp.stream(64):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            arrivals.append((time.monotonic(), line))
    ended = time.monotonic()
    assert [line for _, line in arrivals] == [f"tick {i}".encode() for i in range(10)]
    # lines came while the process ran, not all at the end
    assert arrivals[-1][0] - arrivals[0][0] > 0.5
    assert ended - arrivals[-1][0] < 30  # the follow ends with the container
    assert wait_for(lambda: phase(core, "follow") == "Succeeded")


def test_follow_wakes_without_polling_delay(core):
    core.create_namespaced_pod("default", pod("wake", "sleep 0.6; echo one; sleep 0.6; echo two"))
    wait_for(lambda: phase(core, "wake") == "Running")
    resp = core.read_namespaced_pod_log("wake", "default", follow=True, timestamps=True, _preload_content=False)
    got: list[tuple[float, str]] = []
    buf = b""
    for chunk in resp.stream(16):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            got.append((time.time(), line.decode()))
    assert [g[1].split(" ", 1)[1] for g in got] == ["one", "two"]
    for arrived, line in got:  # delivered within a fraction of a second of being read
        assert arrived - parse_rfc3339nano(line.split(" ")[0]) / 1e9 < 0.5


def test_follow_ends_when_client_disconnects(core, simcluster):
    core.create_namespaced_pod("default", pod("chatty", "while true; do echo x; sleep 0.05; done"))
    wait_for(lambda: phase(core, "chatty") == "Running")
    t0 = time.time()
    resp = core.read_namespaced_pod_log("chatty", "default", follow=True, _preload_content=False)
    next(resp.stream(2))
    resp.close()
    sim = simcluster.sim

    def follow_finished() -> bool:  # a request is recorded when its handler returns
        return any(r.path.endswith("/pods/chatty/log") and "follow=true" in r.query
                   for r in simcluster.call(sim.requests.since, t0))

    wait_for(follow_finished, timeout=5)
    assert phase(core, "chatty") == "Running"
    assert raw_log(core, "chatty", tail_lines=1) == b"x\n"


def test_previous_after_restart(core, simcluster):
    simcluster.call(setattr, simcluster.sim.kubelet, "backoff_base", 0.2)
    script = "if [ -f marker ]; then echo second; sleep 30; else touch marker; echo first; exit 1; fi"
    core.create_namespaced_pod("default", pod("prev", script, restart="Always"))
    wait_for(lambda: (c := core.read_namespaced_pod("prev", "default").status.container_statuses)
             and c[0].restart_count == 1 and c[0].state.running)
    wait_for(lambda: raw_log(core, "prev") == b"second\n")
    assert raw_log(core, "prev", previous=True) == b"first\n"


def test_follow_of_crashlooping_container_ends_with_instance(core, simcluster):
    simcluster.call(setattr, simcluster.sim.kubelet, "backoff_base", 3600.0)
    core.create_namespaced_pod("default", pod("loop", "echo once; sleep 0.3; exit 1", restart="Always"))
    wait_for(lambda: (c := core.read_namespaced_pod("loop", "default").status.container_statuses)
             and c[0].state.waiting and c[0].state.waiting.reason == "CrashLoopBackOff", timeout=10)
    resp = core.read_namespaced_pod_log("loop", "default", follow=True, _preload_content=False)
    assert resp.data == b"once\n"
    # it ended with the instance, not after the back-off (two minutes): the container has not restarted
    assert core.read_namespaced_pod("loop", "default").status.container_statuses[0].restart_count == 1
    assert raw_log(core, "loop", previous=True) == b"once\n"


def test_errors_as_the_real_server_reports_them(core, k8s):
    two = [{"name": "a", "image": "x", "command": ["sleep", "30"]},
           {"name": "b", "image": "x", "command": ["sleep", "30"]}]
    core.create_namespaced_pod("default", pod("two", "", containers=two))
    wait_for(lambda: phase(core, "two") == "Running")
    code, body = api_error(lambda: core.read_namespaced_pod_log("two", "default"))
    assert (code, body["reason"]) == (400, "BadRequest")
    assert body["message"] == "a container name must be specified for pod two, choose one of: [a b]"
    assert body["kind"] == "Status" and body["status"] == "Failure"
    code, body = api_error(lambda: core.read_namespaced_pod_log("two", "default", container="zz"))
    assert (code, body["message"]) == (400, "container zz is not valid for pod two")
    code, body = api_error(lambda: core.read_namespaced_pod_log("two", "default", container="a", previous=True))
    assert (code, body["message"]) == (400, 'previous terminated container "a" in pod "two" not found')
    code, body = api_error(lambda: core.read_namespaced_pod_log("ghost", "default"))
    assert (code, body["reason"], body["message"]) == (404, "NotFound", 'pods "ghost" not found')
    code, headers, raw = get_log(k8s, "two", container="a", sinceSeconds="5", sinceTime="2026-01-01T00:00:00Z")
    body = json.loads(raw)
    assert headers["Content-Type"] == "application/json"
    # the real API server: ValidatePodLogOptions -> 422 Invalid
    assert (code, body["reason"]) == (422, "Invalid")
    assert body["message"] == ('PodLogOptions "two" is invalid: : Forbidden: at most one of `sinceTime` or '
                               '`sinceSeconds` may be specified')
    code, body = api_error(lambda: core.read_namespaced_pod_log("two", "default", container="a", tail_lines=-1))
    assert code == 422 and "tailLines: Invalid value: -1: must be greater than or equal to 0" in body["message"]
    code, body = api_error(lambda: core.read_namespaced_pod_log("two", "default", container="a", limit_bytes=0))
    assert code == 422 and "limitBytes: Invalid value: 0: must be greater than 0" in body["message"]
    # a container still being created (its ConfigMap volume does not exist yet)
    body = pod("stuck", "true", volumes=[{"name": "v", "configMap": {"name": "absent"}}])
    body["spec"]["containers"][0]["volumeMounts"] = [{"name": "v", "mountPath": "/cfg"}]
    core.create_namespaced_pod("default", body)
    time.sleep(0.2)
    code, body = api_error(lambda: core.read_namespaced_pod_log("stuck", "default"))
    assert (code, body["message"]) == (400, 'container "main" in pod "stuck" is waiting to start: ContainerCreating')
    # not bound to a node: empty, as the real API server answers
    unbound = pod("unbound", "true")
    del unbound["spec"]["nodeName"]
    core.create_namespaced_pod("default", unbound)
    assert raw_log(core, "unbound") == b""


def test_kubectl_logs(core, kubectl):
    name = run_to_end(core, pod("kl", "echo alpha; echo beta >&2; sleep 0.1; echo gamma"))
    out = kubectl.run("logs", name).stdout
    assert sorted(out.splitlines()) == ["alpha", "beta", "gamma"]
    assert kubectl.run("logs", name, "--tail=1").stdout == "gamma\n"
    stamped = kubectl.run("logs", name, "--timestamps").stdout.splitlines()
    assert len(stamped) == 3 and all(parse_rfc3339nano(s.split(" ")[0]) for s in stamped)
    err = kubectl.run("logs", "nope", check=False)
    assert err.returncode != 0 and 'pods "nope" not found' in err.stderr


def test_kubectl_logs_follow(core, kubectl):
    core.create_namespaced_pod("default", pod("kf", "i=0; while [ $i -lt 8 ]; do echo n$i; i=$((i+1)); sleep 0.15; done"))
    wait_for(lambda: phase(core, "kf") == "Running")
    proc = kubectl.popen("logs", "-f", "kf")
    first: list[float] = []

    def watch_first() -> None:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        first.append(time.monotonic())
        rest = proc.stdout.read()
        first.append(len((line + rest).splitlines()))

    t = threading.Thread(target=watch_first)
    t.start()
    proc.wait(60)  # (it ends with the container)
    t.join(30)
    done = time.monotonic()
    assert proc.returncode == 0
    assert first[1] == 8
    assert done - first[0] > 0.4  # the first line arrived well before the end


def test_many_ranks_no_line_lost(core, simcluster):
    """32 ranks x 4,000 lines in bursts: every line captured, in order, and served."""
    ranks, lines = 32, 4000
    script = (f"i=0; while [ $i -lt {lines} ]; do j=0; while [ $j -lt 500 ]; do echo \"rank $R line $i\"; "
              "i=$((i+1)); j=$((j+1)); done; sleep 0.05; done")
    for r in range(ranks):
        body = pod(f"rank-{r}", script)
        body["spec"]["containers"][0]["env"] = [{"name": "R", "value": str(r)}]
        core.create_namespaced_pod("default", body)
    wait_for(lambda: all(p.status.phase == "Succeeded" for p in core.list_namespaced_pod("default").items
                         if p.metadata.name.startswith("rank-")), timeout=60, interval=0.3)
    for r in range(ranks):
        data = raw_log(core, f"rank-{r}").decode().splitlines()
        assert data == [f"rank {r} line {i}" for i in range(lines)], r


def test_format_helpers():
    assert format_rfc3339nano(1_767_225_600_123_456_789) == "2026-01-01T00:00:00.123456789Z"
    assert format_rfc3339nano(1_767_225_600_120_000_000) == "2026-01-01T00:00:00.12Z"
    assert format_rfc3339nano(1_767_225_600_000_000_000) == "2026-01-01T00:00:00Z"
    assert parse_rfc3339nano("2026-01-01T00:00:00.12Z") == 1_767_225_600_120_000_000
    assert parse_rfc3339nano("2026-01-01T00:00:00Z") == 1_767_225_600_000_000_000
