"""monitors.promql (query builders, answer parsing), prom_discovery ranking, and the GpuMetrics
state machine and non-overlap against a scripted HTTP Prometheus (real sockets, real requests)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from monitors import promql
from monitors.exposition import parse
from monitors.metrics import GpuMetrics, MetricState, SourceKind
from monitors.prom_discovery import ApiEndpoint, PromService, rank_services
from monitors.promql import FIELDS_BY_KEY, PromError

NAMES = promql.metric_names()


# -- builders ---------------------------------------------------------------------------------


def test_pod_query_reads_both_spellings_in_one_query() -> None:
    q = promql.pod_query(FIELDS_BY_KEY["util"], NAMES, ["team-b", "team-a", "team-a"])
    left, right = q.split(" or ")
    assert left.startswith("avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL{")
    assert 'namespace=~"team-a|team-b"' in left and 'pod!=""' in left and 'exported_pod=""' in left
    assert left.endswith(" >= 0 <= 100)")
    assert 'exported_namespace=~"team-a|team-b",exported_pod!=""' in right
    assert '"namespace", "$1", "exported_namespace", "(.*)"' in right
    assert '"pod", "$1", "exported_pod", "(.*)"' in right
    assert right.startswith("avg by (namespace, pod) (label_replace(label_replace(")


def test_field_aggregations_and_bounds() -> None:
    qs = promql.pod_queries(NAMES, ["ns"])
    assert set(qs) == {"util", "gpus", "sm_active", "mem_used_mib", "mem_total_mib", "power_w", "temp_c", "xid",
                       "throttle"}
    assert qs["gpus"].startswith("count by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL{") and ">=" not in qs["gpus"]
    assert qs["xid"].startswith("max by (namespace, pod) (DCGM_FI_DEV_XID_ERRORS{")
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in qs["sm_active"] and "<= 1)" in qs["sm_active"]
    assert "(DCGM_FI_DEV_FB_USED{" in qs["mem_total_mib"] and "+ DCGM_FI_DEV_FB_FREE{" in qs["mem_total_mib"]
    assert "e+" not in "".join(qs.values())  # plain numbers only
    assert promql.pod_queries(NAMES, []) == {}


def test_node_and_history_queries() -> None:
    q = promql.node_query(FIELDS_BY_KEY["util"], NAMES, None)
    assert 'label_replace(DCGM_FI_DEV_GPU_UTIL{Hostname!=""} >= 0 <= 100, "node", "$1", "Hostname", "(.*)")' in q
    assert 'DCGM_FI_DEV_GPU_UTIL{hostname!=""}' in q and q.count("avg by (node)") == 2
    q = promql.node_query(FIELDS_BY_KEY["gpus"], NAMES, ["n2", "n1"])
    assert 'Hostname=~"n1|n2"' in q and 'hostname=~"n1|n2"' in q
    assert promql.node_queries(NAMES, []) == {}
    assert len(promql.node_queries(NAMES, None)) == len(promql.FIELDS)
    h = promql.history_query(NAMES, ["a"], ["w-1", "w-0"])
    assert h is not None and 'pod=~"w-0|w-1"' in h and 'exported_pod=~"w-0|w-1"' in h
    assert promql.history_query(NAMES, [], ["x"]) is None


def test_escaping_and_metric_names() -> None:
    assert promql.regex_escape("a.b+c(d)|e") == r"a\.b\+c\(d\)\|e"
    assert promql.promql_string('x"y\\z') == '"x\\"y\\\\z"'
    q = promql.pod_query(FIELDS_BY_KEY["util"], NAMES, ["a.b"])
    assert 'namespace=~"a\\\\.b"' in q  # RE2 escape inside a PromQL string literal
    names = promql.metric_names({"util": "my_gpu_util"})
    assert names["util"] == "my_gpu_util" and names["mem_used"] == "DCGM_FI_DEV_FB_USED"
    assert "my_gpu_util{" in promql.pod_queries(names, ["a"])["util"]
    with pytest.raises(ValueError, match="unknown metric key"):
        promql.metric_names({"utilisation": "x"})
    with pytest.raises(ValueError):
        promql.metric_names({"util": " "})


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (prometheus package) not installed")
def test_every_query_parses_with_promtool(tmp_path: Path) -> None:
    """Prometheus' own parser accepts every query we build (as recording-rule expressions)."""
    exprs = list(promql.pod_queries(NAMES, ["team-a", "odd.ns"], exclude_pods=".*dcgm-exporter.*").values())
    exprs += list(promql.node_queries(NAMES, None).values()) + list(promql.node_queries(NAMES, ["n1"]).values())
    exprs.append(promql.history_query(NAMES, ["team-a"], ["w-0", "w-1"]))
    rules = {"groups": [{"name": "g", "rules": [{"record": f"r{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump(rules))
    proc = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in proc.stdout


# -- parsing ----------------------------------------------------------------------------------


def _vec(*series: tuple[dict[str, str], str]) -> list[dict[str, Any]]:
    return [{"metric": m, "value": [1700000000.0, v]} for m, v in series]


def test_parse_vector_both_spellings_and_bad_values() -> None:
    result = _vec(
        ({"namespace": "a", "pod": "p0"}, "85"),
        ({"exported_namespace": "a", "exported_pod": "p1", "namespace": "gpu-operator",
          "pod": "nvidia-dcgm-exporter-x"}, "42.5"),
        ({"namespace": "a", "pod": "nan"}, "NaN"),
        ({"namespace": "a", "pod": "inf"}, "+Inf"),
        ({"namespace": "a", "pod": "ninf"}, "-Inf"),
        ({"namespace": "a", "pod": "big"}, "4294967295"),
        ({"namespace": "a", "pod": "neg"}, "-1"),
        ({"namespace": "a", "pod": "junk"}, "abc"),
        ({"namespace": "", "pod": ""}, "50"),  # an idle GPU: no key, ignored
    )
    got = promql.parse_vector(result, promql.pod_key, FIELDS_BY_KEY["util"])
    assert got[("a", "p0")].value == 85.0 and got[("a", "p0")].ok
    assert got[("a", "p1")].value == 42.5  # exported_* wins over the exporter's own labels
    assert {k[1]: r.problem for k, r in got.items() if not r.ok} == {
        "nan": "NaN", "inf": "+Inf", "ninf": "-Inf", "big": "out of range: 4294967295",
        "neg": "out of range: -1", "junk": "not a number: 'abc'",
    }
    assert all(r.value is None for r in got.values() if not r.ok)  # never 0
    assert len(got) == 8


def test_parse_scaling_integers_nodes_and_old_labels() -> None:
    sm = promql.parse_vector(_vec(({"namespace": "a", "pod": "p"}, "0.5")), promql.pod_key, FIELDS_BY_KEY["sm_active"])
    assert sm[("a", "p")].value == 50.0
    bad = promql.parse_vector(_vec(({"namespace": "a", "pod": "p"}, "1.5")), promql.pod_key, FIELDS_BY_KEY["sm_active"])
    assert not bad[("a", "p")].ok
    xid = promql.parse_vector(_vec(({"namespace": "a", "pod": "p"}, "79")), promql.pod_key, FIELDS_BY_KEY["xid"])
    assert xid[("a", "p")].value == 79.0
    nodes = promql.parse_vector(
        _vec(({"node": "n1"}, "10"), ({"Hostname": "n2"}, "20"), ({"hostname": "n3"}, "30")), promql.node_key
    )
    assert {k: r.value for k, r in nodes.items()} == {"n1": 10.0, "n2": 20.0, "n3": 30.0}
    assert promql.pod_key({"pod_namespace": "o", "pod_name": "q"}) == ("o", "q")


def test_parse_matrix_drops_bad_points() -> None:
    result = [{"metric": {"exported_namespace": "a", "exported_pod": "p"},
               "values": [[10, "80"], [11, "NaN"], [12, "4294967295"], [13, "82"], ["x", "1"]]}]
    assert promql.parse_matrix(result, promql.pod_key, promql.HISTORY_FIELD) == {("a", "p"): [(10.0, 80.0), (13.0, 82.0)]}


def test_parse_response_kinds() -> None:
    ok = promql.parse_response(200, json.dumps({
        "status": "success", "warnings": ["partial data: store x unreachable"],
        "data": {"resultType": "vector", "result": []}}))
    assert ok.result_type == "vector" and ok.warnings == ("partial data: store x unreachable",)
    with pytest.raises(PromError) as e:
        promql.parse_response(400, json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"}))
    assert e.value.kind == "query" and "bad_data" in e.value.message
    with pytest.raises(PromError) as e:
        promql.parse_response(503, json.dumps({"status": "error", "errorType": "unavailable", "error": "shutting down"}))
    assert e.value.kind == "unavailable" and e.value.status == 503
    with pytest.raises(PromError) as e:
        promql.parse_response(422, json.dumps({"status": "error", "errorType": "timeout", "error": "query timed out"}))
    assert e.value.kind == "unavailable"
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 503,
              "message": 'no endpoints available for service "prometheus-k8s"'}
    with pytest.raises(PromError) as e:
        promql.parse_response(503, json.dumps(status))
    assert e.value.kind == "unavailable" and "no endpoints available" in e.value.message
    with pytest.raises(PromError) as e:
        promql.parse_response(502, b"<html>Bad Gateway</html>")
    assert e.value.kind == "unavailable" and "HTTP 502" in e.value.message
    with pytest.raises(PromError):
        promql.parse_response(200, b"not json")


def test_aggregate_samples_like_promql() -> None:
    text = "\n".join(
        f'{m}{{gpu="{g}",Hostname="n1",namespace="{ns}",pod="{pod}"}} {v}'
        for m, g, ns, pod, v in [
            ("DCGM_FI_DEV_GPU_UTIL", 0, "a", "p", "80"),
            ("DCGM_FI_DEV_GPU_UTIL", 1, "a", "p", "90"),
            ("DCGM_FI_DEV_GPU_UTIL", 2, "a", "p", "4294967295"),  # broken GPU: excluded, still counted
            ("DCGM_FI_DEV_GPU_UTIL", 3, "a", "q", "NaN"),
            ("DCGM_FI_DEV_GPU_UTIL", 4, "", "", "0"),  # idle GPU
            ("DCGM_FI_DEV_FB_USED", 0, "a", "p", "1000"),
            ("DCGM_FI_DEV_FB_FREE", 0, "a", "p", "79000"),
            ("DCGM_FI_DEV_FB_USED", 1, "a", "p", "3000"),
            ("DCGM_FI_DEV_FB_FREE", 1, "a", "p", "77000"),
            ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0, "a", "p", "0.25"),
            ("DCGM_FI_DEV_XID_ERRORS", 0, "a", "p", "0"),
            ("DCGM_FI_DEV_XID_ERRORS", 1, "a", "p", "79"),
        ]
    )
    samples = parse(text).samples
    pods = promql.aggregate_samples(samples, NAMES, promql.pod_key)
    p = {k: r.value for k, r in pods[("a", "p")].items()}
    assert p == {"util": 85.0, "gpus": 3.0, "mem_used_mib": 2000.0, "mem_total_mib": 80000.0,
                 "sm_active": 25.0, "xid": 79.0}
    q = pods[("a", "q")]
    assert q["util"].value is None and q["util"].problem == "NaN" and q["gpus"].value == 1.0
    nodes = promql.aggregate_samples(samples, NAMES, promql.node_key)
    assert nodes["n1"]["gpus"].value == 5.0 and nodes["n1"]["util"].value == pytest.approx(170 / 3)


def test_rank_services() -> None:
    def svc(ns: str, name: str, *ports: tuple[str, int]) -> dict[str, Any]:
        return {"metadata": {"namespace": ns, "name": name},
                "spec": {"ports": [{"name": n, "port": p} for n, p in ports]}}

    ranked = rank_services([
        svc("x", "prometheus-server", ("http", 80)),
        svc("obs", "kube-prometheus-stack-prometheus", ("http-web", 9090), ("reloader-web", 8080)),
        svc("obs", "prometheus-operated", ("web", 9090)),
        svc("monitoring", "prometheus-k8s", ("web", 9090), ("reloader-web", 8080)),
        svc("other", "prometheus-k8s", ("web", 9090)),  # only monitoring/prometheus-k8s is special
        svc("obs", "grafana", ("http", 3000)),
        svc("a", "no-port-prometheus", ("metrics", 8080)),
        svc("b", "custom-prometheus", ("web", 19090)),
    ])
    assert [str(s) for s in ranked] == [
        "monitoring/prometheus-k8s:9090", "obs/prometheus-operated:9090",
        "b/custom-prometheus:19090", "obs/kube-prometheus-stack-prometheus:9090", "x/prometheus-server:80",
    ]
    assert PromService("monitoring", "prometheus-k8s", "9090").path == \
        "/api/v1/namespaces/monitoring/services/prometheus-k8s:9090/proxy"


# -- the poller against a scripted Prometheus ----------------------------------------------------


class Scripted:
    """A tiny HTTP Prometheus with scripted answers: mode ok | 503 | warn | slow; util value."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.util = "85"
        self.delay = 0.0
        self.requests: list[str] = []
        self.inflight_primary = 0
        self.max_inflight_primary = 0
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None
        self.port = 0
        self.start()

    def start(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:
                outer.handle(self)

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # the default 5 drops parallel connects (1 s SYN retry)

        srv = Server(("127.0.0.1", self.port), Handler)
        srv.daemon_threads = True
        self.port = srv.server_address[1]
        self.server = srv
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def value_for(self, q: str) -> str:
        if q.startswith("count by"):
            return "2"
        for metric, value in (("DCGM_FI_DEV_GPU_UTIL", self.util), ("DCGM_FI_DEV_FB_FREE", "81920"),
                              ("DCGM_FI_DEV_FB_USED", "1000"), ("GR_ENGINE", "0.5"), ("POWER", "300"),
                              ("TEMP", "60"), ("XID", "0")):
            if metric in q:
                return value
        return "1"

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        url = urlparse(h.path)
        q = parse_qs(url.query).get("query", [""])[0]
        primary = q.startswith("avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL") and url.path.endswith("/query")
        with self.lock:
            self.requests.append(q)
            if primary:
                self.inflight_primary += 1
                self.max_inflight_primary = max(self.max_inflight_primary, self.inflight_primary)
        try:
            if self.delay:
                time.sleep(self.delay)
            status, body = self.answer(url.path, q)
            data = json.dumps(body).encode()
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            if primary:
                with self.lock:
                    self.inflight_primary -= 1

    def answer(self, path: str, q: str) -> tuple[int, dict[str, Any]]:
        if self.mode == "503":
            return 503, {"status": "error", "errorType": "unavailable", "error": "TSDB not ready"}
        key = {"node": "n1"} if "by (node)" in q else {"namespace": "team-a", "pod": "w-0"}
        warnings: list[str] = []
        if self.mode == "warn":
            warnings = ["partial response: one store unreachable"]
            return 200, {"status": "success", "warnings": warnings, "data": {"resultType": "vector", "result": []}}
        if path.endswith("/query_range"):
            return 200, {"status": "success", "data": {"resultType": "matrix", "result": [
                {"metric": key, "values": [[1000, "80"], [1015, "NaN"], [1030, self.util]]}]}}
        return 200, {"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": key, "value": [time.time(), self.value_for(q)]}]}}


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    s = Scripted()
    yield s
    s.stop()


class Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


SHOWN = [("team-a", "w-0")]


async def test_state_machine_ok_stale_unavailable_recovers(scripted: Scripted) -> None:
    clock = Clock()
    gm = GpuMetrics(scripted.url, interval=15.0, timeout=2.0, clock=clock)
    try:
        src = await gm.resolve_source()
        assert src.kind is SourceKind.PROMETHEUS and str(src) == f"prometheus({scripted.url})"
        gm.set_shown(SHOWN, ["team-a"], nodes=["n1"])
        snap = await gm.refresh()
        assert snap.state is MetricState.OK and snap.reason == ""
        pm = snap.pods[("team-a", "w-0")]
        assert pm.state is MetricState.OK
        s = pm.sample
        assert s is not None
        assert (s.util, s.gpus, s.sm_active, s.mem_used_mib, s.mem_total_mib, s.power_w, s.temp_c, s.xid) == \
            (85.0, 2, 50.0, 1000.0, 81920.0, 300.0, 60.0, 0)
        assert snap.nodes["n1"].state is MetricState.OK and snap.nodes["n1"].sample.util == 85.0  # type: ignore[union-attr]
        assert gm.history("team-a", "w-0") == [(1000.0, 80.0), (1030.0, 85.0)]
        assert snap.queries == 2 * len(promql.FIELDS) + 1

        scripted.mode = "503"
        clock.t += 15  # one interval later: the last value is still recent
        snap = await gm.refresh()
        assert snap.state is MetricState.UNAVAILABLE and "HTTP 503" in snap.reason and "TSDB not ready" in snap.reason
        assert snap.queries == 1  # the source is down: nothing more is sent
        pm = snap.pods[("team-a", "w-0")]
        assert pm.state is MetricState.OK and pm.sample is s and "15 s ago" in pm.reason

        clock.t += 45  # 60 s old > 3 intervals: stale, value kept
        snap = await gm.refresh()
        pm = snap.pods[("team-a", "w-0")]
        assert pm.state is MetricState.STALE and pm.sample is s and "HTTP 503" in pm.reason
        assert snap.nodes["n1"].state is MetricState.STALE

        scripted.stop()  # connection refused now
        clock.t += 600
        snap = await gm.refresh()
        assert snap.state is MetricState.UNAVAILABLE and "refused" in snap.reason
        pm = snap.pods[("team-a", "w-0")]
        assert pm.state is MetricState.UNAVAILABLE and pm.sample is None and "refused" in pm.reason

        scripted.mode = "ok"
        scripted.start()  # same port
        clock.t += 15
        snap = await gm.refresh()
        assert snap.state is MetricState.OK
        pm = snap.pods[("team-a", "w-0")]
        assert pm.state is MetricState.OK and pm.sample is not None and pm.sample.util == 85.0
        assert pm.sample.at == clock.t
    finally:
        await gm.aclose()


@pytest.mark.parametrize("bad", ["NaN", "+Inf", "4294967295", "-3"])
async def test_bad_utilisation_is_no_data_never_zero(scripted: Scripted, bad: str) -> None:
    scripted.util = bad
    gm = GpuMetrics(scripted.url, interval=15.0, timeout=2.0)
    try:
        gm.set_shown(SHOWN, ["team-a"])
        snap = await gm.refresh()
        assert snap.state is MetricState.OK
        pm = snap.pods[("team-a", "w-0")]
        assert pm.state is MetricState.NO_DATA
        assert pm.sample is not None and pm.sample.util is None and pm.sample.gpus == 2
        assert "no valid GPU utilisation" in pm.reason
        assert gm.history("team-a", "w-0") == [(1000.0, 80.0)]  # bad points dropped, not zeroed
    finally:
        await gm.aclose()


async def test_missing_series_partial_answer_and_timeout(scripted: Scripted) -> None:
    clock = Clock()
    gm = GpuMetrics(scripted.url, interval=15.0, timeout=0.5, clock=clock)
    try:
        gm.set_shown([*SHOWN, ("team-a", "gone")], ["team-a"])
        snap = await gm.refresh()
        assert snap.pods[("team-a", "gone")].state is MetricState.NO_DATA
        assert snap.pods[("team-a", "gone")].sample is None
        assert snap.pods[("team-a", "w-0")].state is MetricState.OK

        scripted.mode = "warn"  # success, with warnings and no series
        clock.t += 60
        snap = await gm.refresh()
        assert snap.state is MetricState.OK and snap.warnings == ("partial response: one store unreachable",)
        pm = snap.pods[("team-a", "w-0")]
        assert pm.state is MetricState.STALE and "partial answer" in pm.reason and pm.sample is not None
        assert snap.pods[("team-a", "gone")].state is MetricState.UNAVAILABLE

        scripted.mode, scripted.delay = "ok", 8.0
        snap = await gm.refresh()  # (the timeout, 0.5 s, ends it, not the answer 8 s later: the reason says so)
        assert snap.state is MetricState.UNAVAILABLE and "timed out after 0.5 s" in snap.reason
    finally:
        scripted.delay = 0
        await gm.aclose()


async def test_concurrent_refreshes_do_not_overlap(scripted: Scripted) -> None:
    scripted.delay = 0.3
    gm = GpuMetrics(scripted.url, interval=15.0, timeout=2.0)
    try:
        gm.set_shown(SHOWN, ["team-a"])
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        beat = 0

        async def heartbeat() -> None:  # the loop stays responsive while queries run in threads
            nonlocal beat
            while loop.time() - t0 < 0.5:
                await asyncio.sleep(0.01)
                beat += 1

        a, b, c, _ = await asyncio.gather(gm.refresh(), gm.refresh(), gm.refresh(), heartbeat())
        assert a is b is c
        assert gm.refreshes == 1 and gm.joined == 2
        assert len(scripted.requests) == len(promql.FIELDS) + 1
        assert beat >= 20
    finally:
        await gm.aclose()


async def test_run_skips_ticks_instead_of_stacking(scripted: Scripted) -> None:
    scripted.delay = 0.25  # a refresh takes ~0.5 s (util first, then the rest in parallel)
    gm = GpuMetrics(scripted.url, interval=0.2, timeout=2.0)
    gm.set_shown(SHOWN, ["team-a"])
    stop = asyncio.Event()
    snaps = []
    task = asyncio.create_task(gm.run(snaps.append, stop))
    extra = []
    await asyncio.sleep(0.3)
    extra.append(await gm.refresh())  # joins the running refresh
    await asyncio.sleep(1.2)
    stop.set()
    await asyncio.wait_for(task, 5)
    await gm.aclose()
    assert scripted.max_inflight_primary == 1
    assert 2 <= gm.refreshes <= 4 and gm.skipped >= 2
    assert len(snaps) == gm.refreshes or len(snaps) == gm.refreshes - 1
    assert all(s.state is MetricState.OK for s in snaps)
    assert extra[0] in snaps or extra[0] is gm.last


async def test_one_shot_without_history_and_metric_names(scripted: Scripted) -> None:
    gm = GpuMetrics(scripted.url, interval=15.0, history_window=0, metric_names={"xid": "MY_XID"})
    try:
        gm.set_shown(SHOWN, ["team-a"])
        snap = await gm.refresh()
        assert snap.state is MetricState.OK and snap.queries == len(promql.FIELDS)
        assert not any("query_range" in q for q in scripted.requests)
        assert sum("MY_XID{" in q for q in scripted.requests) == 1
        assert not any("DCGM_FI_DEV_XID_ERRORS" in q for q in scripted.requests)
        assert gm.history("team-a", "w-0") == []
    finally:
        await gm.aclose()


async def test_no_source_without_url_or_api() -> None:
    gm = GpuMetrics(interval=15.0)
    try:
        src = await gm.resolve_source()
        assert src.kind is SourceKind.NONE and str(src) == "none"
        gm.set_shown(SHOWN)
        snap = await gm.refresh()
        assert snap.state is MetricState.UNAVAILABLE and "no GPU metrics" in snap.reason
        assert snap.pods[("team-a", "w-0")].state is MetricState.UNAVAILABLE
    finally:
        await gm.aclose()


async def test_unreachable_api_server_gives_none_source() -> None:
    gm = GpuMetrics(api=ApiEndpoint("http://127.0.0.1:9"), interval=15.0, timeout=1.0)
    try:
        src = await gm.resolve_source()
        assert src.kind is SourceKind.NONE
        assert any("refused" in n for n in src.notes), src.notes
    finally:
        await gm.aclose()
