"""`ranks projects | list | get | top` as a user runs them: a real process, simcluster, a real Prometheus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kubeflow_objects import job, pod
from tests.prometheus_server import prometheus_server
from tests.waiting import wait_for

pytestmark = pytest.mark.simcluster(scenario="demo", components=("dcgm",))
NS = "runai-team-a"


def ranks_cli(*args: str, kubeconfig: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    e.update(env or {})
    cmd = [sys.executable, "-m", "tui.cli", *args]
    if kubeconfig is not None:
        cmd += ["--kubeconfig", str(kubeconfig)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=e)


def seed(sim) -> None:
    def annotated(p: dict, util: str) -> dict:
        p["metadata"]["annotations"] = {"simcluster.ranks/gpu-util": util}
        return p

    sim.apply(job("PyTorchJob", "mnist", NS, {"Master": 1, "Worker": 1}, conditions=[("Running", "")],
                  labels={"ranks/user": "alice"}))
    sim.apply(annotated(pod("PyTorchJob", "mnist", NS, "Master", 0, node="h100-node-01"), "85"))
    sim.apply(annotated(pod("PyTorchJob", "mnist", NS, "Worker", 0, node="h100-node-02"), "85"))
    sim.apply(job("MPIJob", "hvd", NS, {"Launcher": 1, "Worker": 2}, command=["sleep", "infinity"],
                  conditions=[("Running", "")]))
    sim.apply(pod("MPIJob", "hvd", NS, "Launcher", None, gpus=0, name="hvd-launcher-ab3cd",
                  command=["sleep", "infinity"], node="a100-node-01"))
    for i in range(2):
        sim.apply(pod("MPIJob", "hvd", NS, "Worker", i, node="a100-node-02"))
    sim.apply(job("PyTorchJob", "waiting", "runai-team-b", {"Master": 1}, gpus=8))
    sim.apply(pod("PyTorchJob", "waiting", "runai-team-b", "Master", 0, phase="Pending", gpus=8,
                  unschedulable="0/8 nodes are available: 8 Insufficient nvidia.com/gpu."))
    evil = job("PyTorchJob", "evil", "research", {"Master": 1}, conditions=[("Running", "")])
    evil["metadata"]["labels"] = {"ranks/user": "x"}
    evil["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"] = [
        "echo", "\x1b]0;pwned\x07[bold red]markup[/]\x1b[2J"]
    sim.apply(evil)


@pytest.fixture
def cluster(simcluster):
    simcluster.call(seed, simcluster.sim)
    return simcluster


@pytest.fixture
def prometheus(cluster, tmp_path):
    from simcluster.gpu.prometheus import dcgm_scrape_config

    # every GPU node's exporter is up before Prometheus learns its targets
    targets = len(wait_for(lambda: t if len(t := cluster.call(cluster.sim.dcgm.targets)) >= 8 else None, 20,
                           "the 8 GPU nodes' exporters", interval=0.1))
    cfg = cluster.call(dcgm_scrape_config, cluster.sim)
    with prometheus_server(cfg, tmp_path / "prom") as prom:
        # every exporter scraped once (not only the first pod's node), and the first pod's series
        prom.wait_for("up == 1", lambda r: len(r) >= targets, timeout=45)
        prom.wait_for('DCGM_FI_DEV_GPU_UTIL{pod="mnist-worker-0"}', lambda r: bool(r), timeout=45)
        yield prom


def test_list_json_and_table(cluster):
    kc = cluster.sim.kubeconfig_path
    out = ranks_cli("list", "-A", "-o", "json", kubeconfig=kc)
    assert out.returncode == 0, out.stderr
    wls = {w["name"]: w for w in json.loads(out.stdout)["workloads"]}
    assert set(wls) == {"mnist", "hvd", "waiting", "evil"}
    m = wls["mnist"]
    assert (m["kind"], m["framework"], m["status"], m["ranks_ready"], m["ranks_total"]) == (
        "PyTorchJob", "pytorch", "Running", 2, 2)
    assert m["project"] == "team-a" and m["user"] == "alice" and m["gpus_requested"] == 2
    assert m["gpu_util"] == 85  # no Prometheus: the DCGM exporters scraped through the pod proxy
    assert wls["hvd"]["interactive"] is True and wls["hvd"]["framework"] == "mpi"
    w = wls["waiting"]
    assert (w["status"], w["reason"]) == ("Pending", "0/8 nodes are available: 8 Insufficient nvidia.com/gpu.")
    assert set(m) == {"name", "namespace", "project", "kind", "framework", "status", "reason", "interactive",
                      "ranks_ready", "ranks_total", "gpus_requested", "gpus_allocated", "gpu_util", "age_seconds",
                      "user"}
    # global flags after the subcommand, and a project by name
    table = ranks_cli("list", "-p", "team-a", "--kubeconfig", str(kc))
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:4] == ["NAME", "KIND", "STATUS", "RANKS"]
    assert {ln.split()[0] for ln in lines[1:]} == {"hvd", "mnist"}


def test_get_ranks_and_gpu_from_prometheus(cluster, prometheus):
    kc = cluster.sim.kubeconfig_path
    out = ranks_cli("get", "mnist", "-p", "team-a", "-o", "json", "--prometheus", prometheus.url, kubeconfig=kc)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    ranks = data["ranks"]
    assert [(r["role"], r["rank"], r["lead"]) for r in ranks] == [("master", 0, True), ("worker", 1, False)]
    assert [r["gpu_util"] for r in ranks] == [85, 85]
    assert all(r["gpu_mem_total_mib"] == 81559 for r in ranks)
    assert data["workload"]["gpu_util"] == 85
    hvd = json.loads(ranks_cli("get", "hvd", "-p", NS, "-o", "json", "--prometheus", prometheus.url,
                               kubeconfig=kc).stdout)
    assert hvd["ranks"][0]["pod"] == "hvd-launcher-ab3cd" and hvd["ranks"][0]["lead"]
    assert hvd["ranks"][0]["gpu_util"] is None  # the launcher holds no GPU
    text = ranks_cli("get", "mnist", "-p", "team-a", "--prometheus", prometheus.url, kubeconfig=kc)
    assert "master-0 *" in text.stdout and "85%" in text.stdout and "Events:" in text.stdout


def test_top_nodes_and_projects(cluster, prometheus):
    kc = cluster.sim.kubeconfig_path
    nodes = json.loads(ranks_cli("top", "nodes", "-o", "json", "--prometheus", prometheus.url, kubeconfig=kc).stdout)
    by = {n["name"]: n for n in nodes["nodes"]}
    assert by["h100-node-01"]["gpus"] == 8 and by["h100-node-01"]["gpus_allocated"] == 1
    assert by["h100-node-01"]["gpu_util"] is not None
    projects = json.loads(ranks_cli("projects", "-o", "json", "--prometheus", prometheus.url, kubeconfig=kc).stdout)
    pa = {p["name"]: p for p in projects["projects"]}
    assert pa["team-a"]["gpu_quota"] == 16 and pa["team-a"]["gpus_allocated"] == 4
    assert pa["team-a"]["running"] == 2 and pa["team-b"]["pending"] == 1


def test_untrusted_text_is_stripped(cluster):
    out = ranks_cli("get", "evil", "-p", "research", kubeconfig=cluster.sim.kubeconfig_path)
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    assert "[bold red]markup[/]" in out.stdout  # shown literally, not interpreted


def test_namespace_limited_user(cluster):
    kc = cluster.sim.kubeconfig_path
    out = ranks_cli("list", "--context", "ranks-sim-alice", "-o", "json", kubeconfig=kc)
    assert out.returncode == 0, out.stderr
    assert {w["name"] for w in json.loads(out.stdout)["workloads"]} == {"mnist", "hvd"}
    top = ranks_cli("top", "nodes", "--context", "ranks-sim-alice", kubeconfig=kc)
    assert top.returncode == 7
    assert top.stderr.startswith("ranks: error: forbidden:") and "Traceback" not in top.stderr


def test_errors_are_one_line_with_exit_codes(cluster, tmp_path):
    kc = cluster.sim.kubeconfig_path
    cases = [
        (ranks_cli("list", kubeconfig=tmp_path / "missing"), 3, "does not exist"),
        (ranks_cli("list", "--context", "nope", kubeconfig=kc), 3, 'context "nope" not found'),
        (ranks_cli("get", "nosuch", "-p", "team-a", kubeconfig=kc), 8, 'workload "nosuch" not found'),
        (ranks_cli("list", "-p", "nosuchproject", kubeconfig=kc), 8, 'project "nosuchproject" not found'),
        (ranks_cli("list", "-p", "a", "-A", kubeconfig=kc), 2, "cannot be used together"),
        (ranks_cli("list", "-o", "xml", kubeconfig=kc), 2, "Invalid value"),
    ]
    bad = tmp_path / "bad-token.yaml"
    bad.write_text(kc.read_text().replace(cluster.sim.admin_token, "wrong-token"))
    cases.append((ranks_cli("list", "-A", kubeconfig=bad), 6, "unauthorized"))
    down = tmp_path / "down.yaml"
    down.write_text(kc.read_text().replace(f":{cluster.sim.port}", ":9"))
    cases.append((ranks_cli("list", "-A", kubeconfig=down), 4, "cannot reach the API server at https://127.0.0.1:9"))
    for proc, code, text in cases:
        assert proc.returncode == code, (proc.args, proc.stderr)
        assert text in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) <= 3


def test_exec_plugin_credentials_and_tls_failure(cluster, tmp_path):
    import yaml

    sim = cluster.sim
    cfg = yaml.safe_load(sim.kubeconfig_path.read_text())
    plugin = tmp_path / "token-plugin.sh"
    plugin.write_text(
        "#!/bin/sh\n"
        f'echo \'{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",'
        f'"status":{{"token":"{sim.admin_token}"}}}}\'\n'
    )
    plugin.chmod(0o755)
    admin = next(u for u in cfg["users"] if u["name"] == "admin")
    admin["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
                              "interactiveMode": "Never"}}
    kc = tmp_path / "exec.yaml"
    kc.write_text(yaml.safe_dump(cfg))
    out = ranks_cli("list", "-A", "-o", "json", kubeconfig=kc)
    assert out.returncode == 0, out.stderr
    assert "mnist" in {w["name"] for w in json.loads(out.stdout)["workloads"]}
    # a CA that did not sign the server's certificate: a TLS failure, exit 5
    import base64

    from simcluster.apiserver.tls import make_tls

    other = make_tls()
    cfg["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(other.ca_pem).decode()
    bad = tmp_path / "badca.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    out = ranks_cli("list", "-A", kubeconfig=bad)
    assert out.returncode == 5, out.stderr
    assert out.stderr.startswith("ranks: error: TLS verification failed for https://127.0.0.1:")


def test_shell_completion_scripts():
    for shell in ("bash", "zsh", "fish"):
        out = ranks_cli(env={"_RANKS_COMPLETE": f"{shell}_source"})
        assert out.returncode == 0 and "_RANKS_COMPLETE" in out.stdout, (shell, out.stderr)
