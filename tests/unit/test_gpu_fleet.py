"""Every GPU from the DCGM exporter's own fields and labels (#30 items 1-3), on exposition text:
identity in every label spelling, MIG devices, figures not exported (None, never 0, said once),
marks, attribution by UUID, and the doctor's lines."""

from __future__ import annotations

import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from monitors import exposition
from monitors.diagnostics.gpu_doctor import Direct, NodeGpus, diagnose, fields_in
from monitors.gpu_fleet import (
    DeviceReport,
    Gpu,
    Owner,
    attribute_by_uuid,
    build,
    build_from,
    parse_reported,
    parse_reported_uuids,
    place,
    sort_key,
)
from monitors.gpu_fleet_export import fleet_json, row_cells
from monitors.gpu_fleet_source import group_query, triples_of
from monitors.promql import Answer

UUID0, UUID1 = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52", "GPU-11111111-2222-3333-4444-555555555555"
LABELLED = f"""# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="{UUID0}",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="n1",container="pytorch",namespace="team-a",pod="mnist-worker-0"}} 97
DCGM_FI_DEV_GPU_UTIL{{gpu="1",UUID="{UUID1}",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="n1",container="",namespace="",pod=""}} 0
DCGM_FI_DEV_FB_USED{{gpu="0",UUID="{UUID0}",Hostname="n1",pod="mnist-worker-0",namespace="team-a"}} 61234
DCGM_FI_DEV_FB_FREE{{gpu="0",UUID="{UUID0}",Hostname="n1",pod="mnist-worker-0",namespace="team-a"}} 20000
DCGM_FI_DEV_GPU_TEMP{{gpu="0",UUID="{UUID0}",Hostname="n1"}} 88
DCGM_FI_DEV_GPU_TEMP{{gpu="1",UUID="{UUID1}",Hostname="n1"}} 31
DCGM_FI_DEV_POWER_USAGE{{gpu="0",UUID="{UUID0}",Hostname="n1"}} 690.5
DCGM_FI_DEV_POWER_MGMT_LIMIT{{gpu="0",UUID="{UUID0}",Hostname="n1"}} 700
DCGM_FI_DEV_CLOCKS_EVENT_REASONS{{gpu="0",UUID="{UUID0}",Hostname="n1"}} 36
DCGM_FI_DEV_CLOCKS_EVENT_REASONS{{gpu="1",UUID="{UUID1}",Hostname="n1"}} 1
DCGM_FI_DEV_XID_ERRORS{{gpu="0",UUID="{UUID0}",Hostname="n1"}} 79
DCGM_FI_DEV_XID_ERRORS{{gpu="1",UUID="{UUID1}",Hostname="n1"}} 0
"""
# a node whose exporter has no pod labels (lower-case `hostname`, as dcgm-exporter since #655), MIG
BARE = """DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-aaaaaaaa-0000-0000-0000-000000000000",modelName="NVIDIA A100-SXM4-80GB",hostname="n2"} 80
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-bbbbbbbb-0000-0000-0000-000000000000",modelName="NVIDIA A100-SXM4-80GB",hostname="n2"} 0
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-cccccccc-0000-0000-0000-000000000000",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",Hostname="n3",exported_namespace="team-b",exported_pod="bert-0",namespace="gpu-operator",pod="nvidia-dcgm-exporter-x1"} NaN
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-cccccccc-0000-0000-0000-000000000000",GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",Hostname="n3",namespace="gpu-operator",pod="nvidia-dcgm-exporter-x1"} 0
"""


def _fleet():  # type: ignore[no-untyped-def]
    samples = exposition.parse(LABELLED).samples
    bare = exposition.parse(BARE).samples
    return build([*samples, *bare], pod_labels={"n1": True, "n2": False})


def test_rows_figures_and_marks() -> None:
    fleet = _fleet()
    assert sorted(fleet.gpus) == [("n1", 0, ""), ("n1", 1, ""), ("n2", 0, ""), ("n2", 1, ""), ("n3", 0, "1"),
                                  ("n3", 0, "2")]
    g = fleet.gpus[("n1", 0, "")]
    assert (g.uuid, g.model, g.util, g.mem_used, g.mem_total, g.power_limit, g.xid) == (
        UUID0, "NVIDIA H100 80GB HBM3", 97, 61234, 81234, 700, 79)
    assert g.owner == Owner("team-a", "mnist-worker-0", "pytorch") and g.owned_by == "labels"
    assert g.throttle == ("power_cap", "sw_thermal")
    assert g.flags == ("hot", "throttled", "erroring")
    free = fleet.gpus[("n1", 1, "")]
    assert free.owner is None and free.throttle == () and free.flags == ()  # (idle clocks: no throttle)
    # the exported_* spelling wins over the exporter pod's own labels; those alone are no owner
    mig = fleet.gpus[("n3", 0, "1")]
    assert (mig.owner, mig.mig_profile, mig.util) == (Owner("team-b", "bert-0", ""), "3g.40gb", None)
    assert fleet.gpus[("n3", 0, "2")].owner is None
    # a figure no exporter of the node serves is None, never 0, and said once with why
    assert fleet.gpus[("n2", 0, "")].temp is None and fleet.gpus[("n2", 0, "")].xid is None
    assert fleet.gpus[("n2", 0, "")].flags == ("unclaimed",)
    missing = fleet.missing()
    assert missing["reasons"] == ["n2", "n3"] and "ecc_dbe" in missing and "util" not in missing
    notes = fleet.missing_notes()
    assert any("DCGM_FI_DEV_CLOCKS_EVENT_REASONS" in n and "default counters" in n for n in notes)
    assert any("DCGM_FI_DEV_GPU_TEMP" in n and "nodes n2, n3" in n for n in notes)
    cells = row_cells(fleet.gpus[("n2", 0, "")])
    assert cells[5] == "-" and cells[8] == "-" and cells[9] == "-" and cells[-1] == "unclaimed"
    doc = fleet_json([fleet.gpus[("n2", 0, "")]], fleet, notes, "test")
    assert doc["gpus"][0]["temp_c"] is None and doc["gpus"][0]["xid"] is None and doc["gpus"][0]["throttle"] is None


def test_owners_placed_and_attributed_by_uuid() -> None:
    fleet = _fleet()
    owners = {("team-a", "mnist-worker-0"): Owner("team-a", "mnist-worker-0", "", "PyTorchJob/mnist", "PyTorchJob",
                                                  "mnist", 1, "worker-0", "team-a", "alice", 100.0),
              ("team-c", "nb-0"): Owner("team-c", "nb-0", project="team-c", created=50.0)}
    place(fleet, owners)
    g = fleet.gpus[("n1", 0, "")]
    assert (g.owner.workload, g.owner.rank, g.owner.container, g.owner.user) == (
        "PyTorchJob/mnist", 1, "pytorch", "alice")
    said = parse_reported_uuids("GPU-aaaaaaaa-0000-0000-0000-000000000000\n"
                                "GPU 0: NVIDIA A100 (UUID: GPU-aaaaaaaa-0000-0000-0000-000000000000)\n")
    assert said == ["GPU-aaaaaaaa-0000-0000-0000-000000000000"]
    assert attribute_by_uuid(fleet, ["n2"], {("team-c", "nb-0"): said}, owners) == (1, [])
    nb = fleet.gpus[("n2", 0, "")]
    assert (nb.owner.pod, nb.owned_by, nb.allocated, nb.flags) == ("nb-0", "uuid", True, ())
    by_age = sorted(fleet.gpus.values(), key=sort_key("age"))
    assert [g.owner.pod for g in by_age[:2] if g.owner] == ["nb-0", "mnist-worker-0"]
    assert sorted(fleet.gpus.values(), key=sort_key("util"))[0].key == ("n1", 0, "")


def test_prometheus_answers_one_query_per_group() -> None:
    queries = [group_query(g) for g in ("identity", "memory", "thermal", "errors")]
    assert queries[0].startswith("max by (Hostname, hostname, gpu, UUID") and "exported_pod" in queries[0]
    assert queries[2].startswith("max by (__name__, Hostname, hostname, gpu, GPU_I_ID) ({__name__=~")
    assert "DCGM_FI_DEV_CLOCKS_EVENT_REASONS|DCGM_FI_DEV_CLOCK_THROTTLE_REASONS" in queries[2]
    answer = Answer("vector", [
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "Hostname": "n1", "gpu": "0"}, "value": [1, "71"]},
        {"metric": {"Hostname": "n1", "gpu": "0", "UUID": UUID0}, "value": [1, "bad"]}, "junk",
        {"metric": {"__name__": ["DCGM_FI_DEV_GPU_TEMP"], "Hostname": "n1", "gpu": "1"}, "value": [1, "3"]},
        {"metric": ["Hostname"], "value": [1, "3"]}, {"metric": {"Hostname": "n1"}, "value": [1, "2", 3]},
        {"value": [1, "3"]}])
    series = list(triples_of([answer], "DCGM_FI_DEV_GPU_UTIL"))
    assert [(name, v) for name, _, v in series] == [("DCGM_FI_DEV_GPU_TEMP", 71.0)]


def test_prometheus_triples_build_what_exposition_samples_build() -> None:
    """`build_from` on a Prometheus answer's elements (`gpu_fleet_source.read_prometheus`) makes
    the rows `build` makes of the same series read from an exporter's page; elements whose labels
    are not a GPU's (an index that is no number, a number too long, no node) are left out."""
    samples = exposition.parse(LABELLED).samples
    answer = Answer("vector", [{"metric": {"__name__": s.name, **s.labels}, "value": [1, repr(s.value)]}
                               for s in samples]
                    + [{"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "Hostname": "n1", "gpu": gpu}, "value": [1, "5"]}
                       for gpu in ("x", "1234567", "", 3)]
                    + [{"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "gpu": "0"}, "value": [1, "5"]}])
    assert build_from(triples_of([answer], "DCGM_FI_DEV_GPU_UTIL")) == build(samples)


def test_the_doctor_says_what_is_wrong_one_line_each() -> None:
    fleet = _fleet()
    k8s = {"n1": NodeGpus(2, 1), "n2": NodeGpus(2, 1), "n3": NodeGpus(2, 1), "n4": NodeGpus(8, 0)}
    lines = diagnose(fleet, k8s, by_uuid={"n2": 1})
    assert lines[0].startswith("no DCGM exporter answers for node n4 (1 of 4 GPU nodes)")
    assert any(ln.startswith("the DCGM exporter of node n2 has no pod/namespace labels") and "by UUID" in ln
               and "/var/lib/kubelet/pod-resources" in ln for ln in lines)
    assert any("DCGM_FI_DEV_POWER_MGMT_LIMIT" in ln for ln in lines)
    assert any(ln.startswith("GPU 0 (GPU-aaaaaaaa") and "no pod claims it" in ln for ln in lines)
    assert diagnose(fleet, k8s, no_source="nothing found") == ["no DCGM exporter found: nothing found"]
    # through Prometheus: a node whose exporter serves pod labels and fields Prometheus lacks
    direct = {"n3": Direct(fields_in(["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP"]), True, 1),
              "n1": Direct(fields_in(["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"]), True, 1)}
    fleet.pod_labels["n3"] = False
    lines = diagnose(fleet, k8s, prometheus=True, direct=direct)
    assert any("Prometheus' series of node n3 have no pod/namespace labels" in ln for ln in lines)
    assert any("Prometheus has no DCGM_FI_DEV_GPU_TEMP of node n3" in ln and "relabel" in ln for ln in lines)
    assert any("Prometheus has no DCGM_FI_DEV_ECC_SBE_VOL_TOTAL of node n1" in ln for ln in lines)


def test_a_ranks_xid_and_throttle_and_its_failure() -> None:
    import calendar

    from monitors.diagnostics.gpu_health import failure_gpu_line, gpu_findings
    from monitors.model import GpuReading, LiveModel
    from monitors.parse import parse_job, parse_namespace, parse_pod
    from monitors.promql import first_xids, xid_history_query
    from tests.kubeflow_objects import job, pod

    ns, t_exit = "team-b", calendar.timegm((2026, 11, 1, 0, 5, 0))
    clock = [t_exit - 4]
    m = LiveModel(now=lambda: clock[0])
    m.apply_namespaces([(ns, parse_namespace({"metadata": {"name": ns}}))])
    rec = parse_job("PyTorchJob", "kubeflow.org", "v1")(job("PyTorchJob", "bert", ns, {"Master": 1, "Worker": 1},
                                                            conditions=[("Running", "")]))
    m.apply_jobs([(rec.key, rec)])
    running = [parse_pod(pod("PyTorchJob", "bert", ns, r, 0, node="n12")) for r in ("Master", "Worker")]
    m.apply_pods([(p.key, p) for p in running])
    m.set_gpu({running[0].key: GpuReading("ok", 90, 1, 2, xid=0, throttle=0x20 | 0x1),
               running[1].key: GpuReading("ok", 90, 1, 2, xid=79, throttle=0)}, {})
    m.flush()
    wl = next(iter(m.workloads.values()))
    master, worker = wl.ranks
    assert (master.gpu_throttle, master.gpu_xid, worker.gpu_xid, worker.gpu_xid_at) == (
        ("sw_thermal",), None, 79, t_exit - 4)
    assert any("master-0's GPUs are throttled (sw_thermal)" in f.text for f in gpu_findings(wl, {}))
    # the worker fails 4 s after its GPU raised the XID: kept though its pod no longer reports
    failed = parse_pod(pod("PyTorchJob", "bert", ns, "Worker", 0, node="n12", phase="Failed",
                           terminated=(1, "Error")))
    m.apply_pods([(failed.key, failed)])
    m.set_gpu({running[0].key: GpuReading("ok", 90, 1, 2, xid=0)}, {})
    m.flush()
    wl = next(iter(m.workloads.values()))
    line = failure_gpu_line(wl, {})
    assert line.startswith("rank 1's GPU on node n12 raised XID 79 (GPU has fallen off the bus) at ")
    assert line.endswith(", 4 s before it exited")
    # Prometheus' history says which GPU, and when it first showed
    q = xid_history_query({"xid": "DCGM_FI_DEV_XID_ERRORS"}, ns, ["bert-worker-0"])
    assert 'pod=~"bert-worker-0"' in q and "> 0" in q and "exported_pod" in q
    found = first_xids([{"metric": {"namespace": ns, "pod": "bert-worker-0", "Hostname": "n12", "gpu": "3"},
                         "values": [[t_exit - 2, "79"], [t_exit - 6, "79"]]}])
    assert found == [((ns, "bert-worker-0"), "n12", 3, 79, t_exit - 6)]
    from monitors.model_views import GpuXid

    line = failure_gpu_line(wl, {(ns, "bert-worker-0"): GpuXid(ns, "bert-worker-0", "n12", 3, 79, t_exit - 6)})
    assert line.startswith("rank 1's GPU 3 on node n12 raised XID 79") and "6 s before" in line
    assert failure_gpu_line(wl, {(ns, "bert-worker-0"): GpuXid(ns, "bert-worker-0", "n12", 3, 79, t_exit - 90)}) == ""
    # the job run again under the same name: an XID the earlier pod's GPU raised before this pod was
    # created is not this failure's
    again = pod("PyTorchJob", "bert", ns, "Worker", 0, node="n12", phase="Failed", terminated=(1, "Error"))
    again["metadata"]["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_exit - 10))
    rerun = parse_pod(again)
    m.apply_pods([(rerun.key, rerun)])
    m.flush()
    wl = next(iter(m.workloads.values()))
    assert next(r.created for r in wl.ranks if r.pod == "bert-worker-0") == t_exit - 10
    old_xid = {(ns, "bert-worker-0"): GpuXid(ns, "bert-worker-0", "n12", 3, 79, t_exit - 30)}
    assert failure_gpu_line(wl, old_xid) == ""
    new_xid = {(ns, "bert-worker-0"): GpuXid(ns, "bert-worker-0", "n12", 3, 79, t_exit - 6)}
    assert "6 s before" in failure_gpu_line(wl, new_xid)


# -- MIG devices attributed by UUID (#30): what a pod reports, and which instance that tells ------------

G0 = "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77"
G1 = "GPU-e91edf3b-b297-37c1-a2a7-7601c3238fa2"


def test_a_pods_report_tells_whole_gpus_mig_instances_and_mig_profiles() -> None:
    # R450/R460: the device plugin's MIG-<GPU UUID>/<GPU instance>/<compute instance>
    old = parse_reported(f"MIG-{G0}/1/0,MIG-{G0}/2/0\n")
    assert old == DeviceReport((), ((G0, "1"), (G0, "2")), ())
    # R470 and later: MIG-<UUID> names no instance; nvidia-smi -L lists the device under its GPU
    new = parse_reported("MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f\n"
                         f"GPU 0: NVIDIA A100-SXM4-80GB (UUID: {G0})\n"
                         "  MIG 3g.40gb     Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)\n")
    assert new == DeviceReport((), (), ((G0, "3g.40gb"),))  # (its GPU's line: a parent, not a GPU it holds)
    whole = parse_reported(f"{G1}\nGPU 0: NVIDIA H100 80GB HBM3 (UUID: {G1})\n")
    assert whole == DeviceReport((G1,), (), ())
    assert parse_reported("\x1b]0;x\x07 MIG-GPU-nothex/1/0 GPU-12\n") == DeviceReport()


def _mig_fleet() -> Any:
    from monitors.gpu_fleet import Fleet

    fleet = Fleet()
    for uuid, index in ((G0, 0), (G1, 1)):
        for inst in ("1", "2"):
            g = Gpu("mig-node", index, inst, uuid, "NVIDIA A100-SXM4-80GB", "3g.40gb", util=50.0)
            fleet.gpus[g.key] = g
    whole = Gpu("mig-node", 2, "", "GPU-00000000-0000-0000-0000-00000000000a", "NVIDIA A100-SXM4-80GB", "")
    fleet.gpus[whole.key] = whole
    return fleet


def test_mig_devices_are_attributed_by_their_gpus_uuid_and_instance() -> None:
    fleet = _mig_fleet()
    owners = {("t", "a"): Owner("t", "a", workload="PyTorchJob/a", kind="PyTorchJob", name="a", rank=0)}
    reports = {("t", "a"): parse_reported(f"MIG-{G0}/2/0\n"),
               ("t", "b"): parse_reported(f"GPU 0: NVIDIA A100-SXM4-80GB (UUID: {G1})\n"
                                          "  MIG 3g.40gb     Device  0: (UUID: MIG-11111111-2222-3333-4444-555555555555)\n"
                                          "  MIG 3g.40gb     Device  1: (UUID: MIG-66666666-2222-3333-4444-555555555555)\n")}
    n, untold = attribute_by_uuid(fleet, ["mig-node"], reports, owners)
    assert (n, untold) == (3, [])
    held = {k: (g.owner.pod if g.owner else None, g.owned_by) for k, g in fleet.gpus.items()}
    assert held == {("mig-node", 0, "1"): (None, ""), ("mig-node", 0, "2"): ("a", "uuid"),
                    ("mig-node", 1, "1"): ("b", "uuid"), ("mig-node", 1, "2"): ("b", "uuid"),
                    ("mig-node", 2, ""): (None, "")}
    assert fleet.gpus[("mig-node", 0, "2")].owner.workload == "PyTorchJob/a"


def test_mig_devices_several_pods_report_by_profile_alone_are_said_not_guessed() -> None:
    fleet = _mig_fleet()
    one = "  MIG 3g.40gb     Device  0: (UUID: MIG-{}1111111-2222-3333-4444-555555555555)\n"
    reports = {pk: parse_reported(f"GPU 0: NVIDIA A100-SXM4-80GB (UUID: {G0})\n" + one.format(i))
               for i, pk in enumerate((("t", "a"), ("t", "b")))}
    # (and the one left after an exact report is told: c holds G1's instance 1, d reports G1 by profile)
    reports[("t", "c")] = parse_reported(f"MIG-{G1}/1/0\n")
    reports[("t", "d")] = parse_reported(f"GPU 0: NVIDIA A100-SXM4-80GB (UUID: {G1})\n" + one.format(9))
    n, untold = attribute_by_uuid(fleet, ["mig-node"], reports, {})
    assert n == 2
    assert [(g.owner.pod if g.owner else None) for g in (fleet.gpus[("mig-node", 0, "1")],
            fleet.gpus[("mig-node", 0, "2")], fleet.gpus[("mig-node", 1, "1")],
            fleet.gpus[("mig-node", 1, "2")])] == [None, None, "c", "d"]
    assert untold == [f"MIG devices 3g.40gb of mig-node's GPU {G0}: held by t/a, t/b; which instance is whose "
                      "their MIG UUIDs do not tell"]


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                     lambda c: st.lists(c, max_size=2) | st.dictionaries(st.text(max_size=3), c, max_size=2),
                     max_leaves=4)
_LABEL = st.sampled_from(["__name__", "Hostname", "hostname", "gpu", "UUID", "modelName", "GPU_I_ID", "GPU_I_PROFILE",
                          "namespace", "pod", "container", "exported_pod", "exported_namespace"])
_GPU = st.fixed_dictionaries({"__name__": st.sampled_from(["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED",
                                                          "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_GPU_TEMP"]),
                              "Hostname": st.sampled_from(["n1", "n2"]), "gpu": st.sampled_from(["0", "1"])})
_METRIC = st.one_of(st.dictionaries(_LABEL, _JSON, max_size=6),
                    _GPU.flatmap(lambda g: st.dictionaries(_LABEL, _JSON, max_size=3).map(lambda d: {**g, **d})))


@settings(max_examples=120, deadline=None)
@given(st.lists(st.fixed_dictionaries({"metric": _METRIC, "value": st.one_of(_JSON, st.tuples(_JSON, _JSON).map(list))}),
                max_size=6))
def test_a_prometheus_answer_of_any_shape_makes_rows_or_none_never_an_error(results: list[dict[str, Any]]) -> None:
    """Labels are strings in Prometheus' answers, but an answer is outside input (#25, item 6): a
    label of another JSON type (a list as the node: unhashable; a number as the UUID) leaves that
    series out or the field empty, and the rows print."""
    fleet = build_from(triples_of([Answer("vector", results)], "DCGM_FI_DEV_GPU_UTIL"), sparse=True)
    gpus = list(fleet.gpus.values())
    for key in ("", "util", "age", "temp", "mem", "power"):
        gpus.sort(key=sort_key(key))
    fleet_json(gpus, fleet, fleet.missing_notes(), "stand-in")
    for g in gpus:
        assert all(isinstance(c, str) for c in row_cells(g, wide=True))
