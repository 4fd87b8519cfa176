import copy
import json

import pytest

from simcluster.apiserver.patch import (
    APPLY,
    JSON_PATCH,
    MERGE,
    STRATEGIC,
    PatchError,
    apply_patch,
    json_patch,
    merge_patch,
    strategic_merge_patch,
    strategic_supported,
)


def make_pod() -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app": "web", "tier": "frontend"},
            "finalizers": ["a.example.com/f", "b.example.com/f"],
            "ownerReferences": [{"uid": "u1", "kind": "ReplicaSet", "name": "rs1"}],
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "app:1",
                    "args": ["--a", "--b"],
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                },
                {"name": "sidecar", "image": "side:1"},
            ],
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}],
            "tolerations": [{"key": "k1", "operator": "Exists"}],
            "imagePullSecrets": [{"name": "s1"}],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}],
        },
    }


@pytest.fixture
def pod():
    obj = make_pod()
    yield obj
    assert obj == make_pod(), "the input object was mutated"


def names(items):
    return [x["name"] for x in items]


# ---------------------------------------------------------------- merge patch (RFC 7386)


def test_merge_patch_sets_replaces_and_deletes(pod):
    out = merge_patch(pod, {"metadata": {"labels": {"tier": None, "new": "x"}}, "spec": {"tolerations": []}})
    assert out["metadata"]["labels"] == {"app": "web", "new": "x"}
    assert out["spec"]["tolerations"] == []
    assert out["spec"]["containers"] == pod["spec"]["containers"]


def test_merge_patch_replaces_lists_wholesale(pod):
    out = merge_patch(pod, {"spec": {"containers": [{"name": "only", "image": "x"}]}})
    assert out["spec"]["containers"] == [{"name": "only", "image": "x"}]


def test_merge_patch_rfc7386_examples():
    assert merge_patch({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": "b"}, {"b": "c"}) == {"a": "b", "b": "c"}
    assert merge_patch({"a": "b"}, {"a": None}) == {}
    assert merge_patch({"a": "b", "b": "c"}, {"a": None}) == {"b": "c"}
    assert merge_patch({"a": ["b"]}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": "c"}, {"a": ["b"]}) == {"a": ["b"]}
    assert merge_patch({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}) == {"a": {"b": "d"}}
    assert merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert merge_patch(["a", "b"], ["c", "d"]) == ["c", "d"]
    assert merge_patch({"a": "b"}, ["c"]) == ["c"]
    assert merge_patch({"a": "foo"}, None) is None
    assert merge_patch({"e": None}, {"a": 1}) == {"e": None, "a": 1}
    assert merge_patch([1, 2], {"a": "b", "c": None}) == {"a": "b"}
    assert merge_patch({}, {"a": {"bb": {"ccc": None}}}) == {"a": {"bb": {}}}


def test_merge_patch_result_shares_nothing_with_inputs(pod):
    patch = {"spec": {"nodeSelector": {"zone": "a"}}}
    out = merge_patch(pod, patch)
    out["spec"]["nodeSelector"]["zone"] = "b"
    out["spec"]["containers"][0]["image"] = "changed"
    assert patch == {"spec": {"nodeSelector": {"zone": "a"}}}
    assert pod["spec"]["containers"][0]["image"] == "app:1"


# ---------------------------------------------------------------- JSON patch (RFC 6902)


def test_json_patch_operations(pod):
    out = json_patch(
        pod,
        [
            {"op": "add", "path": "/metadata/labels/new", "value": "x"},
            {"op": "replace", "path": "/spec/containers/0/image", "value": "app:2"},
            {"op": "remove", "path": "/spec/tolerations"},
            {"op": "add", "path": "/spec/containers/0/args/-", "value": "--c"},
            {"op": "copy", "from": "/metadata/name", "path": "/metadata/labels/name"},
            {"op": "move", "from": "/metadata/labels/tier", "path": "/metadata/labels/layer"},
            {"op": "test", "path": "/status/phase", "value": "Running"},
        ],
    )
    assert out["metadata"]["labels"] == {"app": "web", "new": "x", "name": "web", "layer": "frontend"}
    assert out["spec"]["containers"][0]["image"] == "app:2"
    assert out["spec"]["containers"][0]["args"] == ["--a", "--b", "--c"]
    assert "tolerations" not in out["spec"]


def test_json_patch_test_failure(pod):
    with pytest.raises(PatchError) as exc:
        json_patch(pod, [{"op": "test", "path": "/metadata/name", "value": "other"}])
    assert exc.value.status == 422
    assert str(exc.value) == "testing value /metadata/name failed: test failed"


def test_json_patch_is_atomic(pod):
    with pytest.raises(PatchError):
        json_patch(
            pod,
            [
                {"op": "replace", "path": "/metadata/name", "value": "x"},
                {"op": "test", "path": "/status/phase", "value": "Failed"},
            ],
        )
    assert pod["metadata"]["name"] == "web"


@pytest.mark.parametrize(
    ("ops", "status"),
    [
        ([{"op": "remove", "path": "/metadata/nope"}], 422),
        ([{"op": "replace", "path": "/spec/nope", "value": 1}], 422),
        ([{"op": "add", "path": "/missing/deep", "value": 1}], 422),
        ([{"op": "add", "path": "/spec/containers/9", "value": {}}], 422),
        ([{"op": "bogus", "path": "/a"}], 400),
        ([{"path": "/a"}], 400),
        ([{"op": "add", "path": "/a"}], 400),
        ({"op": "add", "path": "/a", "value": 1}, 400),
    ],
)
def test_json_patch_errors(pod, ops, status):
    with pytest.raises(PatchError) as exc:
        json_patch(pod, ops)
    assert exc.value.status == status


def test_json_patch_does_not_alias_patch_values(pod):
    ops = [
        {"op": "add", "path": "/spec/nodeSelector", "value": {"zone": "a"}},
        {"op": "add", "path": "/spec/nodeSelector/disk", "value": "ssd"},
    ]
    before = copy.deepcopy(ops)
    out = json_patch(pod, ops)
    assert out["spec"]["nodeSelector"] == {"zone": "a", "disk": "ssd"}
    assert ops == before


# ---------------------------------------------------------------- strategic merge patch


def test_smp_merges_containers_by_name(pod):
    out = strategic_merge_patch(pod, {"spec": {"containers": [{"name": "sidecar", "image": "side:2"}]}})
    assert names(out["spec"]["containers"]) == ["app", "sidecar"]
    assert out["spec"]["containers"][1] == {"name": "sidecar", "image": "side:2"}
    assert out["spec"]["containers"][0] == pod["spec"]["containers"][0]


def test_smp_new_element_goes_first_like_the_real_server(pod):
    out = strategic_merge_patch(pod, {"spec": {"containers": [{"name": "new", "image": "n:1", "x": None}]}})
    assert names(out["spec"]["containers"]) == ["new", "app", "sidecar"]
    assert out["spec"]["containers"][0] == {"name": "new", "image": "n:1"}


def test_smp_nested_env_ports_mounts_by_key(pod):
    out = strategic_merge_patch(
        pod,
        {
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "env": [{"name": "B", "value": "22"}, {"name": "C", "value": "3"}],
                        "ports": [{"containerPort": 80, "name": "http"}],
                        "volumeMounts": [{"mountPath": "/data", "readOnly": True}],
                        "args": ["--z"],
                    }
                ]
            }
        },
    )
    app = out["spec"]["containers"][0]
    assert app["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "22"},
        {"name": "C", "value": "3"},
    ]
    assert app["ports"] == [{"containerPort": 80, "protocol": "TCP", "name": "http"}]
    assert app["volumeMounts"] == [{"name": "data", "mountPath": "/data", "readOnly": True}]
    assert app["args"] == ["--z"]  # no merge key: replaced


def test_smp_patch_delete_list_element(pod):
    out = strategic_merge_patch(
        pod,
        {
            "spec": {
                "containers": [{"name": "sidecar", "$patch": "delete"}],
                "volumes": [{"name": "cfg", "$patch": "delete"}, {"name": "nope", "$patch": "delete"}],
            }
        },
    )
    assert names(out["spec"]["containers"]) == ["app"]
    assert names(out["spec"]["volumes"]) == ["data"]


def test_smp_patch_delete_requires_merge_key(pod):
    with pytest.raises(PatchError, match="does not contain declared merge key: name"):
        strategic_merge_patch(pod, {"spec": {"containers": [{"image": "x", "$patch": "delete"}]}})
    with pytest.raises(PatchError, match="does not contain declared merge key: name"):
        strategic_merge_patch(pod, {"spec": {"containers": [{"image": "x"}]}})


def test_smp_patch_replace_in_list(pod):
    out = strategic_merge_patch(
        pod, {"spec": {"containers": [{"$patch": "replace"}, {"name": "solo", "image": "s:1"}]}}
    )
    assert out["spec"]["containers"] == [{"name": "solo", "image": "s:1"}]


def test_smp_patch_replace_and_delete_on_maps(pod):
    out = strategic_merge_patch(pod, {"metadata": {"labels": {"$patch": "replace", "only": "me"}}})
    assert out["metadata"]["labels"] == {"only": "me"}
    out = strategic_merge_patch(pod, {"metadata": {"labels": {"$patch": "delete"}}})
    assert out["metadata"]["labels"] == {}  # the real server leaves an empty map
    out = strategic_merge_patch(pod, {"spec": {"affinity": {"$patch": "delete"}}})
    assert "affinity" not in out["spec"]
    assert strategic_merge_patch(pod, {"$patch": "delete"}) == {}


def test_smp_null_deletes_keys(pod):
    out = strategic_merge_patch(pod, {"metadata": {"labels": {"tier": None}}, "status": None})
    assert out["metadata"]["labels"] == {"app": "web"}
    assert "status" not in out


def test_smp_tolerations_and_unknown_lists_replace(pod):
    out = strategic_merge_patch(
        pod, {"spec": {"tolerations": [{"key": "k2"}], "unknownList": [{"name": "x"}]}, "extra": [1, 2]}
    )
    assert out["spec"]["tolerations"] == [{"key": "k2"}]
    assert out["spec"]["unknownList"] == [{"name": "x"}]
    assert out["extra"] == [1, 2]


def test_smp_finalizers_merge_as_set(pod):
    out = strategic_merge_patch(pod, {"metadata": {"finalizers": ["c.example.com/f", "a.example.com/f"]}})
    assert sorted(out["metadata"]["finalizers"]) == ["a.example.com/f", "b.example.com/f", "c.example.com/f"]
    assert len(out["metadata"]["finalizers"]) == 3


def test_smp_delete_from_primitive_list(pod):
    out = strategic_merge_patch(
        pod, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example.com/f"]}}
    )
    assert out["metadata"]["finalizers"] == ["b.example.com/f"]
    out = strategic_merge_patch(pod, {"metadata": {"$deleteFromPrimitiveList/nothere": ["x"]}})
    assert "nothere" not in out["metadata"]


def test_smp_conditions_owner_refs_pull_secrets(pod):
    out = strategic_merge_patch(
        pod,
        {
            "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Probe"}]},
            "metadata": {"ownerReferences": [{"uid": "u1", "controller": True}]},
            "spec": {"imagePullSecrets": [{"name": "s2"}]},
        },
    )
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "False", "reason": "Probe"},
        {"type": "Initialized", "status": "True"},
    ]
    assert out["metadata"]["ownerReferences"] == [
        {"uid": "u1", "kind": "ReplicaSet", "name": "rs1", "controller": True}
    ]
    assert names(out["spec"]["imagePullSecrets"]) == ["s2", "s1"]


def test_smp_service_ports_merge_by_port():
    svc = {"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}}
    out = strategic_merge_patch(svc, {"spec": {"ports": [{"port": 443, "targetPort": 8443}]}})
    assert out["spec"]["ports"] == [
        {"port": 80, "name": "http"},
        {"port": 443, "name": "https", "targetPort": 8443},
    ]


def test_smp_retain_keys():
    dep = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    out = strategic_merge_patch(dep, {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}})
    assert out == {"spec": {"strategy": {"type": "Recreate"}}}
    with pytest.raises(PatchError, match="invalid patch format of retainKeys"):
        strategic_merge_patch(dep, {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}})


def test_smp_set_element_order(pod):
    out = strategic_merge_patch(
        pod,
        {
            "spec": {
                "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}],
                "containers": [{"name": "app", "image": "app:2"}],
            }
        },
    )
    assert names(out["spec"]["containers"]) == ["sidecar", "app"]
    assert out["spec"]["containers"][1]["image"] == "app:2"
    assert out["spec"]["containers"][1]["env"] == pod["spec"]["containers"][0]["env"]

    out = strategic_merge_patch(
        pod,
        {
            "metadata": {
                "$setElementOrder/finalizers": ["b.example.com/f", "c.example.com/f"],
                "$deleteFromPrimitiveList/finalizers": ["a.example.com/f"],
                "finalizers": ["c.example.com/f"],
            }
        },
    )
    assert out["metadata"]["finalizers"] == ["b.example.com/f", "c.example.com/f"]


def test_smp_set_element_order_with_new_item_last(pod):
    out = strategic_merge_patch(
        pod,
        {
            "spec": {
                "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}, {"name": "new"}],
                "containers": [{"name": "new", "image": "n"}],
            }
        },
    )
    assert names(out["spec"]["containers"]) == ["app", "sidecar", "new"]


def test_smp_bad_directive(pod):
    with pytest.raises(PatchError, match="unknown patch type: bogus"):
        strategic_merge_patch(pod, {"spec": {"$patch": "bogus"}})
    with pytest.raises(PatchError, match="merging lists cannot yet be specified"):
        strategic_merge_patch(pod, {"spec": {"containers": [{"$patch": "merge"}]}})


def test_smp_does_not_mutate_patch(pod):
    patch = {
        "spec": {
            "containers": [
                {"name": "app", "env": [{"name": "A", "value": None}]},
                {"name": "x", "$patch": "delete"},
            ],
            "$setElementOrder/containers": [{"name": "app"}],
        },
        "metadata": {"labels": {"$patch": "replace", "a": "b"}},
    }
    before = copy.deepcopy(patch)
    strategic_merge_patch(pod, patch)
    assert patch == before


def test_strategic_supported():
    for group in ("", "apps", "batch", "rbac.authorization.k8s.io", "networking.k8s.io", "apps/v1"):
        assert strategic_supported(group), group
    for group in ("example.com", "stable.example.com", "monitoring.coreos.com"):
        assert not strategic_supported(group), group


# ---------------------------------------------------------------- apply_patch dispatch


def test_apply_patch_dispatch_and_no_mutation(pod):
    out = apply_patch(pod, {"spec": {"containers": [{"name": "app", "image": "x"}]}}, STRATEGIC)
    assert names(out["spec"]["containers"]) == ["app", "sidecar"]
    out = apply_patch(pod, {"spec": {"containers": [{"name": "app", "image": "x"}]}}, MERGE)
    assert names(out["spec"]["containers"]) == ["app"]
    out = apply_patch(pod, [{"op": "replace", "path": "/spec/containers/1/image", "value": "y"}], JSON_PATCH)
    assert out["spec"]["containers"][1]["image"] == "y"
    assert out is not pod


def test_apply_patch_accepts_raw_bodies_and_parameters(pod):
    out = apply_patch(
        pod, b'{"metadata":{"labels":{"app":null}}}', "application/merge-patch+json; charset=utf-8"
    )
    assert out["metadata"]["labels"] == {"tier": "frontend"}
    out = apply_patch(pod, json.dumps([{"op": "remove", "path": "/status"}]), JSON_PATCH)
    assert "status" not in out
    with pytest.raises(PatchError) as exc:
        apply_patch(pod, b"{not json", MERGE)
    assert exc.value.status == 400


def test_apply_patch_server_side_apply_is_a_merge(pod):
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"applied": "yes"}}}
    out = apply_patch(pod, body, APPLY)
    assert out["metadata"]["labels"] == {"app": "web", "tier": "frontend", "applied": "yes"}
    assert out["spec"] == pod["spec"]
    out = apply_patch(pod, json.dumps(body).encode(), APPLY)
    assert out["metadata"]["labels"]["applied"] == "yes"


def test_apply_patch_unknown_content_type(pod):
    with pytest.raises(PatchError) as exc:
        apply_patch(pod, {}, "application/json")
    assert exc.value.status == 415
    assert "media types" in str(exc.value)


def test_apply_patch_rejects_non_object_results(pod):
    with pytest.raises(PatchError):
        apply_patch(pod, [{"op": "replace", "path": "", "value": [1]}], JSON_PATCH)
    with pytest.raises(PatchError):
        apply_patch(pod, [1, 2], MERGE)
    with pytest.raises(PatchError):
        apply_patch(pod, [1, 2], STRATEGIC)
