"""A real Prometheus (Debian's ``/usr/bin/prometheus``) scraping simcluster's DCGM exporters.

- `dcgm_scrape_config(sim)` builds a scrape config for ``sim.dcgm.targets()``; ``style="static"``
  keeps the exporter's ``namespace``/``pod``/``container`` labels, ``style="servicemonitor"`` adds
  the target labels a ServiceMonitor would (``namespace``, ``pod``, ``container``, ``service``,
  ``endpoint``), so without ``honor_labels`` the workload's labels become ``exported_*`` as on a
  GPU Operator cluster (conventions §5.2).
- `PrometheusServer` writes the config, starts the binary on loopback with its own storage dir,
  waits until it is ready, queries it, reloads it, and always stops it (`stop`, context manager,
  and an ``atexit`` safety net).
- `register_prometheus_service` makes it reachable through the API server's service proxy
  (``/api/v1/namespaces/monitoring/services/prometheus-k8s:9090/proxy/api/v1/query?query=up``):
  a Service, a Ready in-process Pod and a port mapping, as kube-prometheus would have them.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..node.reaper import pdeathsig_preexec

if TYPE_CHECKING:
    from ..cluster import SimCluster

DEFAULT_BINARY = "/usr/bin/prometheus"
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through an env proxy
_LIVE: weakref.WeakSet[PrometheusServer] = weakref.WeakSet()


class PrometheusError(RuntimeError):
    pass


def prometheus_binary() -> str | None:
    """The Prometheus binary to use: $PROMETHEUS_BIN, then PATH, then /usr/bin/prometheus."""
    env = os.environ.get("PROMETHEUS_BIN")
    if env and os.access(env, os.X_OK):
        return env
    found = shutil.which("prometheus")
    if found:
        return found
    return DEFAULT_BINARY if os.access(DEFAULT_BINARY, os.X_OK) else None


# -- configuration ---------------------------------------------------------------------------------


def scrape_job(
    name: str,
    targets: Iterable[tuple[str, dict[str, str]]],
    *,
    interval: str = "1s",
    honor_labels: bool = False,
    metrics_path: str = "/metrics",
) -> dict[str, Any]:
    """One scrape job: `targets` are ("host:port", extra target labels)."""
    return {
        "job_name": name,
        "scrape_interval": interval,
        "scrape_timeout": interval if _seconds(interval) < 10 else "10s",
        "honor_labels": honor_labels,
        "metrics_path": metrics_path,
        "static_configs": [{"targets": [addr], "labels": dict(labels)} for addr, labels in targets],
    }


def config(jobs: list[dict[str, Any]], *, interval: str = "1s") -> dict[str, Any]:
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": jobs,
    }


def dcgm_scrape_config(
    sim: SimCluster,
    *,
    interval: str = "1s",
    style: str = "static",
    honor_labels: bool = False,
    job: str = "gpu-metrics",
) -> dict[str, Any]:
    """A Prometheus config scraping every DCGM exporter of `sim` (call on the cluster's loop)."""
    dcgm = sim.dcgm
    if dcgm is None:
        raise RuntimeError("the cluster has no DCGM exporters (its dcgm component is not installed)")
    pods = dcgm.exporter_pods()
    targets: list[tuple[str, dict[str, str]]] = []
    for node, host, port in dcgm.targets():
        labels = {"node": node}
        if style == "servicemonitor":
            from .dcgm import CONTAINER, NAMESPACE, PORT_NAME, SERVICE

            labels.update({
                "namespace": NAMESPACE, "pod": pods.get(node, ""), "container": CONTAINER,
                "service": SERVICE, "endpoint": PORT_NAME,
            })
        elif style != "static":
            raise ValueError(f"unknown scrape style {style!r} (static or servicemonitor)")
        targets.append((f"{host}:{port}", labels))
    return config([scrape_job(job, targets, interval=interval, honor_labels=honor_labels)], interval=interval)


def _seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for suffix in ("ms", "s", "m", "h"):
        if duration.endswith(suffix):
            try:
                return float(duration[: -len(suffix)]) * units[suffix]
            except ValueError:
                break
    raise ValueError(f"bad duration {duration!r}")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


# -- the server ------------------------------------------------------------------------------------


class PrometheusServer:
    """Debian's Prometheus on loopback, with a temporary storage dir. Use as a context manager."""

    def __init__(
        self,
        cfg: dict[str, Any],
        workdir: str | Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        binary: str | None = None,
        retention: str = "2h",
        extra_args: Iterable[str] = (),
    ) -> None:
        self.cfg = cfg
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="prometheus-"))
        self.host = host
        self.port = port
        self.binary = binary or prometheus_binary()
        self.retention = retention
        self.extra_args = list(extra_args)
        self.proc: subprocess.Popen[bytes] | None = None
        self.config_path = self.workdir / "prometheus.yml"
        self.log_path = self.workdir / "prometheus.log"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- lifecycle ---------------------------------------------------------------------------
    def write_config(self, cfg: dict[str, Any] | None = None) -> Path:
        if cfg is not None:
            self.cfg = cfg
        self.workdir.mkdir(parents=True, exist_ok=True)
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(self.cfg, sort_keys=False))
        os.replace(tmp, self.config_path)
        return self.config_path

    def launch(self) -> PrometheusServer:
        """Start the process without waiting for it to be ready."""
        if self.binary is None:
            raise PrometheusError("prometheus binary not found (install the prometheus package)")
        if self.proc is not None:
            return self
        self.write_config()
        if not self.port:
            self.port = free_port(self.host)
        storage = self.workdir / "data"
        storage.mkdir(parents=True, exist_ok=True)
        args = [
            self.binary,
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={storage}",
            f"--storage.tsdb.retention.time={self.retention}",
            f"--web.listen-address={self.host}:{self.port}",
            "--web.enable-lifecycle",
            "--log.level=warn",
            *self.extra_args,
        ]
        with open(self.log_path, "ab") as logf:
            self.proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                cwd=self.workdir, start_new_session=True, preexec_fn=pdeathsig_preexec(signal.SIGTERM),
            )
        _LIVE.add(self)
        return self

    def start(self, timeout: float = 15.0) -> PrometheusServer:
        """Start and wait until ready; retries on another port if the chosen one was taken."""
        for attempt in range(3):
            self.launch()
            try:
                self.wait_ready(timeout)
                return self
            except PrometheusError:
                exited = self.proc is not None and self.proc.poll() is not None
                self.stop()
                if not exited or attempt == 2:
                    raise
                self.port = 0
        raise AssertionError("unreachable")

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise PrometheusError(f"prometheus exited with {self.proc.returncode}: {self.log_tail()}")

    def is_ready(self) -> bool:
        try:
            with _OPENER.open(f"{self.url}/-/ready", timeout=1) as resp:
                status: int = resp.status
                return status == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            if self.is_ready():
                return
            time.sleep(0.05)
        raise PrometheusError(f"prometheus not ready after {timeout}s: {self.log_tail()}")

    async def wait_ready_async(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            if await asyncio.to_thread(self.is_ready):
                return
            await asyncio.sleep(0.1)
        raise PrometheusError(f"prometheus not ready after {timeout}s: {self.log_tail()}")

    def reload(self, cfg: dict[str, Any] | None = None) -> None:
        """Write a new config and ask the running server to load it."""
        self.write_config(cfg)
        req = urllib.request.Request(f"{self.url}/-/reload", method="POST")
        with _OPENER.open(req, timeout=5) as resp:
            if resp.status != 200:
                raise PrometheusError(f"reload failed: HTTP {resp.status}")

    def stop(self, timeout: float = 5.0) -> None:
        proc, self.proc = self.proc, None
        _LIVE.discard(self)
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(timeout)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # -- HTTP API ----------------------------------------------------------------------------
    def api(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """GET /api/v1/<path>; returns `data` of a successful answer."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with _OPENER.open(url, timeout=10) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read() or b"{}")
        if body.get("status") != "success":
            raise PrometheusError(f"{path}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query; the `result` list (vector)."""
        data = self.api("query", {"query": promql})
        return list(data.get("result") or [])

    def active_targets(self) -> list[dict[str, Any]]:
        return list(self.api("targets", {"state": "active"}).get("activeTargets") or [])

    def wait_for_targets(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Wait until `count` active targets have been scraped successfully."""
        deadline = time.monotonic() + timeout
        targets: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            self._check_alive()
            targets = self.active_targets()
            up = [t for t in targets if t.get("health") == "up"]
            if len(up) >= count:
                return targets
            time.sleep(0.1)
        raise PrometheusError(f"only {targets} after {timeout}s")

    def wait_for(
        self, promql: str, accept: Callable[[list[dict[str, Any]]], bool], timeout: float = 10.0
    ) -> list[dict[str, Any]]:
        """Poll an instant query until `accept(result)`; returns the result."""
        deadline = time.monotonic() + timeout
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            self._check_alive()
            result = self.query(promql)
            if accept(result):
                return result
            time.sleep(0.1)
        raise PrometheusError(f"{promql!r} still {result} after {timeout}s")


@atexit.register
def _stop_all() -> None:
    for srv in list(_LIVE):
        with contextlib.suppress(Exception):
            srv.stop(timeout=2)


# -- exposing it through the API server ------------------------------------------------------------


def register_prometheus_service(
    sim: SimCluster,
    host: str,
    port: int,
    namespace: str = "monitoring",
    name: str = "prometheus-k8s",
    service_port: int = 9090,
) -> str:
    """Create the Service `namespace/name` (port ``web``), a Ready in-process Pod ``<name>-0``
    behind it, and the port mapping to `host:port`. Run on the cluster's loop; returns the pod name.
    """
    from ..apiserver.validation import default
    from ..node import proxy
    from ..node.kubelet import IN_PROCESS

    store = sim.store
    proxy.install(sim)
    if store.find(("", "namespaces"), "", namespace) is None:
        sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    selector = {"app.kubernetes.io/name": "prometheus", "app.kubernetes.io/instance": name}
    labels = {**selector, "app.kubernetes.io/component": "prometheus", "app.kubernetes.io/part-of": "kube-prometheus"}
    svc_rt = sim.registry.get("", "v1", "services")
    pod_rt = sim.registry.get("", "v1", "pods")
    assert svc_rt is not None and pod_rt is not None
    svc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "selector": selector,
            "ports": [{"name": "web", "port": service_port, "targetPort": "web", "protocol": "TCP"}],
            "sessionAffinity": "ClientIP",
        },
    }
    if store.find(svc_rt.key, namespace, name) is None:
        default(svc_rt, svc, sim.server.service_ips)
        store.create(svc_rt, svc, namespace)
    pod_name = f"{name}-0"
    nodes = [st.obj["metadata"]["name"] for st in store.items(("", "nodes"))]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    cond = {"status": "True", "lastProbeTime": None, "lastTransitionTime": now}
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "namespace": namespace,
            "labels": {**labels, "statefulset.kubernetes.io/pod-name": pod_name},
            "annotations": {IN_PROCESS: "true"},
        },
        "spec": {
            "containers": [{
                "name": "prometheus",
                "image": "quay.io/prometheus/prometheus:v2.42.0",
                "ports": [{"name": "web", "containerPort": 9090, "protocol": "TCP"}],
            }],
            **({"nodeName": nodes[0]} if nodes else {}),
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": t, **cond} for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "podIP": "10.244.255.9",
            "podIPs": [{"ip": "10.244.255.9"}],
            "startTime": now,
            "containerStatuses": [{
                "name": "prometheus", "ready": True, "started": True, "restartCount": 0,
                "image": "quay.io/prometheus/prometheus:v2.42.0", "imageID": "",
                "state": {"running": {"startedAt": now}},
            }],
        },
    }
    default(pod_rt, pod, sim.server.service_ips)
    if store.find(pod_rt.key, namespace, pod_name) is not None:
        store.update(pod_rt, pod)
        store.mutate(pod_rt, namespace, pod_name, lambda o: o.__setitem__("status", pod["status"]))
    else:
        store.create(pod_rt, pod, namespace)
    proxy.portmap(sim).register(namespace, pod_name, 9090, host, port)
    return pod_name


def unregister_prometheus_service(
    sim: SimCluster, namespace: str = "monitoring", name: str = "prometheus-k8s"
) -> None:
    """Remove what `register_prometheus_service` created (run on the cluster's loop)."""
    from ..node import proxy

    pod_name = f"{name}-0"
    proxy.portmap(sim).unregister(namespace, pod_name)
    for plural, obj_name in (("pods", pod_name), ("services", name)):
        rt = sim.registry.get("", "v1", plural)
        if rt is not None and sim.store.find(rt.key, namespace, obj_name) is not None:
            sim.store.remove(rt, namespace, obj_name)
