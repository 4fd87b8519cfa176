"""What keeps a 100,000-pod cluster cheap: scale templates that share what does not vary, stored
objects encoded once and only when needed, and watch events filtered on the object before and
after a change."""

from __future__ import annotations

import copy
import random
from datetime import UTC, datetime

import orjson
import pytest

from simcluster.apiserver.resources import Registry
from simcluster.apiserver.store import Event, ObjectStore, Stored, filtered_event
from simcluster.scenarios.scale import build_scale, churn_pod
from simcluster.scenarios.scale.template import Template

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


# -- templates -----------------------------------------------------------------------------------


def test_template_fills_tokens_and_shares_the_rest() -> None:
    tree = {
        "metadata": {"name": "@@NAME@@", "labels": {"idx": "@@IDX@@", "app": "x"}},
        "spec": {
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "containers": [{"name": "main", "env": [{"name": "A", "value": "1"}, {"name": "R", "value": "@@IDX@@"}],
                            "args": ["--out", "/data/@@NAME@@/ckpt-@@IDX@@"]}],
            "replicas": 3,
        },
    }
    before = copy.deepcopy(tree)
    t = Template(tree, ("@@NAME@@", "@@IDX@@"))
    a = t.fill({"@@NAME@@": "a", "@@IDX@@": "0"})
    b = t.fill({"@@NAME@@": "b", "@@IDX@@": "1"})
    assert tree == before  # the template itself is never changed
    assert a["metadata"] == {"name": "a", "labels": {"idx": "0", "app": "x"}}
    assert b["spec"]["containers"][0]["args"] == ["--out", "/data/b/ckpt-1"]
    assert b["spec"]["containers"][0]["env"][1] == {"name": "R", "value": "1"}
    assert list(a["spec"]) == list(tree["spec"])  # key order kept
    # token-free subtrees are the template's own objects, shared by every fill
    assert a["spec"]["tolerations"] is b["spec"]["tolerations"] is tree["spec"]["tolerations"]
    assert a["spec"]["containers"][0]["env"][0] is b["spec"]["containers"][0]["env"][0]
    # the way to a token is copied
    assert a["spec"] is not b["spec"] and a["spec"]["containers"][0]["env"] is not b["spec"]["containers"][0]["env"]
    assert orjson.dumps(a) == orjson.dumps(t.fill({"@@NAME@@": "a", "@@IDX@@": "0"}))


def test_template_rules() -> None:
    with pytest.raises(ValueError):
        Template({"@@K@@": 1}, ("@@K@@",))
    with pytest.raises(ValueError):
        Template({}, ("NAME",))
    constant = {"a": [1, {"b": "c"}]}
    assert Template(constant, ("@@X@@",)).fill({}) is constant


def test_scale_pods_share_read_only_parts_and_churn_copies() -> None:
    objs = build_scale(10, 60, namespaces=2, now=NOW, seed=3)
    running = [p for p in objs.pods if p["status"]["phase"] == "Running" and p["status"]["containerStatuses"][0]["ready"]]
    by_job: dict[str, list[dict]] = {}
    for p in running:
        by_job.setdefault(p["metadata"]["labels"]["training.kubeflow.org/job-name"], []).append(p)
    a, b = next(ps[-2:] for ps in by_job.values() if len(ps) >= 3)
    assert a["spec"]["tolerations"] is b["spec"]["tolerations"]
    assert a["metadata"] is not b["metadata"] and a["spec"] is not b["spec"] and a["status"] is not b["status"]
    assert a["metadata"]["managedFields"] is not b["metadata"]["managedFields"]
    # churn works on a copy: the shared parts of the other pods stay as they were
    snapshot = orjson.dumps(b)
    changed = churn_pod(a, random.Random(1), now=NOW)
    changed["spec"]["tolerations"].append({"key": "x"})
    assert orjson.dumps(b) == snapshot


# -- the store -----------------------------------------------------------------------------------


def _pod(name: str, phase: str = "Pending", labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}, "status": {"phase": phase}}


def test_objects_are_encoded_once_and_only_when_needed() -> None:
    reg = Registry.with_builtins()
    store = ObjectStore(reg)
    rt = reg.get("", "v1", "pods")
    assert rt is not None
    st = store.create(rt, _pod("a"))
    assert not st.encoded
    raw = st.raw
    assert st.encoded and orjson.loads(raw) == st.obj and st.raw is raw
    assert Stored({"a": 1}, b'{"a":1}', 3).raw == b'{"a":1}'


def test_delete_shares_the_unchanged_parts_of_the_object() -> None:
    reg = Registry.with_builtins()
    store = ObjectStore(reg)
    rt = reg.get("", "v1", "pods")
    assert rt is not None
    st = store.create(rt, _pod("d"))
    gone = store.remove(rt, "default", "d")
    assert gone.obj["spec"] is st.obj["spec"]  # no deep copy of the whole pod
    assert gone.obj["metadata"] is not st.obj["metadata"]
    assert st.obj["metadata"]["resourceVersion"] != gone.obj["metadata"]["resourceVersion"]


def test_filtered_events_follow_the_selection() -> None:
    def running(o: dict) -> bool:
        return o["status"]["phase"] == "Running"

    old, new = _pod("p", "Pending"), _pod("p", "Running")
    new["metadata"]["resourceVersion"] = "9"
    key = ("", "pods")
    entered = filtered_event(Event("MODIFIED", key, Stored(new, None, 9), old), running)
    assert entered is not None and entered.type == "ADDED" and entered.obj is new
    kept = filtered_event(Event("MODIFIED", key, Stored(new, None, 9), new), running)
    assert kept is not None and kept.type == "MODIFIED"
    left = filtered_event(Event("MODIFIED", key, Stored(old, None, 9), new), running)
    assert left is not None and left.type == "DELETED" and left.rv == 9
    assert left.obj["status"]["phase"] == "Running" and left.obj["metadata"]["resourceVersion"] == "9"
    assert new["metadata"]["resourceVersion"] == "9" and "resourceVersion" not in old["metadata"]
    assert filtered_event(Event("MODIFIED", key, Stored(old, None, 9), old), running) is None
    assert filtered_event(Event("DELETED", key, Stored(new, None, 9), new), running) is not None
    assert filtered_event(Event("DELETED", key, Stored(old, None, 9), old), running) is None
    assert filtered_event(Event("ADDED", key, Stored(old, None, 9)), running) is None
    ev = Event("ADDED", key, Stored(old, None, 9))
    assert filtered_event(ev, None) is ev


def test_a_namespace_s_objects_are_found_by_their_range_of_the_keys() -> None:
    """A namespaced LIST reads its namespace's keys alone (the sorted keys' range of that namespace,
    as kube-apiserver's watch cache indexes them), not every object of the type: 52 namespace LISTs
    of 100,000 pods read 100,000 keys, not 5.2 million (#31, item 4)."""
    reg = Registry.with_builtins()
    store = ObjectStore(reg)
    rt = reg.get("", "v1", "pods")
    assert rt is not None
    spaces = ("a", "team", "team-a", "team0", "zeta")
    for ns in spaces:
        for i in range(3):
            store.create(rt, {**_pod(f"p{i}"), "metadata": {"name": f"p{i}", "namespace": ns}})
    keys, lo, hi = store.key_range(rt.key, None)
    assert (lo, hi) == (0, len(keys)) and len(keys) == len(spaces) * 3
    for ns in (*spaces, "b", "team-", "zz", "0"):
        keys, lo, hi = store.key_range(rt.key, ns)
        assert keys[lo:hi] == [k for k in keys if k[0] == ns], ns
        assert [st.obj["metadata"]["namespace"] for st in store.items(rt.key, ns)] == [ns] * (3 if ns in spaces else 0)
