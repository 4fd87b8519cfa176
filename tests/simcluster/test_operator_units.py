"""Pure pieces of the operators and the scheduler: quantities, requests, conditions, messages."""

from __future__ import annotations

from fractions import Fraction

import pytest

from simcluster.cluster import SimCluster
from simcluster.controllers.scheduler import Scheduler, parse_quantity, pod_requests
from simcluster.operators.batchjob import _format_indexes
from simcluster.operators.common import (
    aggregate,
    camel_case_keys,
    canonical_pod_spec,
    not_supported,
    set_condition,
)
from simcluster.scenarios.nodes import gpu_node


@pytest.mark.parametrize("text,value", [
    ("500m", Fraction(1, 2)), ("2", Fraction(2)), ("64Gi", Fraction(64 * 2**30)), ("1e3", Fraction(1000)),
    ("1.5", Fraction(3, 2)), ("100k", Fraction(100_000)), (8, Fraction(8)), ("10M", Fraction(10**7)),
])
def test_parse_quantity(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "abc", "1Gb", True])
def test_parse_quantity_rejects(bad):
    with pytest.raises(ValueError):
        parse_quantity(bad)


def test_pod_requests_sum_containers_max_init_and_limits_fill_in():
    spec = {
        "containers": [
            {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "2"}}},
            {"resources": {"requests": {"cpu": "1.5"}}},
        ],
        "initContainers": [{"resources": {"requests": {"cpu": "4", "memory": "512Mi"}}}],
        "overhead": {"cpu": "100m"},
    }
    assert pod_requests(spec) == {"cpu": 4100, "memory": 2**30, "nvidia.com/gpu": 2}
    assert pod_requests({"containers": [{"name": "x"}]}) == {}


def test_conditions_follow_the_training_operator():
    st: dict = {}
    assert set_condition(st, "Created", "True", "PyTorchJobCreated", "created")
    assert set_condition(st, "Running", "True", "PyTorchJobRunning", "running")
    assert not set_condition(st, "Running", "True", "PyTorchJobRunning", "running again")  # same status+reason
    set_condition(st, "Restarting", "True", "PyTorchJobRestarting", "restarting")
    assert [c["type"] for c in st["conditions"]] == ["Created", "Restarting"]  # Restarting replaces Running
    set_condition(st, "Running", "True", "PyTorchJobRunning", "running")
    set_condition(st, "Failed", "True", "PyTorchJobFailed", "failed")
    assert [(c["type"], c["status"]) for c in st["conditions"]] == [
        ("Created", "True"), ("Running", "False"), ("Failed", "True")]
    assert not set_condition(st, "Succeeded", "True", "PyTorchJobSucceeded", "done")  # Failed is final


def test_mpi_conditions_are_not_frozen_by_failure():
    st: dict = {}
    set_condition(st, "Failed", "True", "MPIJobEvicted", "evicted", frozen_when_failed=False, mpi=True)
    set_condition(st, "Succeeded", "True", "MPIJobSucceeded", "ok", frozen_when_failed=False, mpi=True)
    assert [(c["type"], c["status"]) for c in st["conditions"]] == [("Failed", "False"), ("Succeeded", "True")]


def test_field_error_formatting():
    assert aggregate(["a"]) == "a"
    assert aggregate(["a", "b"]) == "[a, b]"
    assert not_supported("spec.x", "Foo", ("A", "B")) == 'spec.x: Unsupported value: "Foo": supported values: "A", "B"'


def test_camel_case_keys():
    assert camel_case_keys({"master": 1, "WORKER": 2, "Chief": 3}, ("Master", "Worker")) == {
        "Master": 1, "Worker": 2, "Chief": 3}
    assert camel_case_keys({"worker": 1, "Worker": 2}, ("Worker",)) == {"Worker": 2}


def test_canonical_quantities():
    spec = {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 4, "cpu": 0.5}, "requests": {"memory": "1Gi"}}}]}
    canonical_pod_spec(spec)
    assert spec["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "4", "cpu": "500m"},
                                                  "requests": {"memory": "1Gi"}}


def test_completed_indexes_format():
    assert _format_indexes([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert _format_indexes([]) == ""


def test_failure_message_histogram_sorts_whole_strings(tmp_path):
    """`sort.Strings` over "<count> <reason>": "10 ..." sorts before "2 ..."."""
    sim = SimCluster(workdir=tmp_path / "sim")
    sched = Scheduler(sim)
    for i in range(12):
        node = gpu_node(f"n{i:02d}", 8, index=i, pool="a" if i < 10 else "b")
        sched._on_node("ADDED", node)
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u"},
           "spec": {"nodeSelector": {"node-pool": "b"},
                    "containers": [{"resources": {"limits": {"nvidia.com/gpu": "9"}}}]}}
    sched._on_pod("ADDED", pod)
    info = sched.pending[("default", "p")]
    assert sched.failure_message(info) == (
        "0/12 nodes are available: 10 node(s) didn't match Pod's node affinity/selector, "
        "2 Insufficient nvidia.com/gpu. preemption: 0/12 nodes are available: "
        "10 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.")
    never = dict(pod, metadata={"name": "q", "namespace": "default", "uid": "v"})
    never["spec"] = dict(pod["spec"], preemptionPolicy="Never")
    sched._on_pod("ADDED", never)
    assert sched.failure_message(sched.pending[("default", "q")]).endswith(
        " preemption: not eligible due to preemptionPolicy=Never.")
