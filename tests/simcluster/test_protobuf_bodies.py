"""simcluster's decoding of Kubernetes protobuf request bodies: the envelope, Go's always-written
zero values, pointers, inlined structs and kinds it has no schema for."""

from __future__ import annotations

import pytest

from simcluster.apiserver import protobuf_bodies as pb


def body(api_version: str, kind: str, msg) -> bytes:
    classes = pb._classes()
    env = classes[pb.UNKNOWN]()
    env.typeMeta.apiVersion, env.typeMeta.kind = api_version, kind
    env.raw = msg.SerializeToString()
    return pb.MAGIC + env.SerializeToString()


def test_go_zero_values_are_dropped_pointers_kept_and_inline_structs_merged():
    classes = pb._classes()
    pod = classes["k8s.io.api.core.v1.Pod"]()
    pod.metadata.name = "p"
    pod.metadata.generateName = ""  # Go writes every non-pointer field
    pod.metadata.creationTimestamp.SetInParent()  # the zero time: an empty message
    c = pod.spec.containers.add()
    c.name, c.image, c.workingDir, c.stdin = "main", "busybox", "", False
    pod.spec.hostNetwork = False
    pod.spec.terminationGracePeriodSeconds = 0  # a pointer: 0 is meant
    vol = pod.spec.volumes.add()
    vol.name = "cfg"
    vol.volumeSource.configMap.localObjectReference.name = "settings"  # inline in Go too
    obj = pb.decode(body("v1", "Pod", pod))
    assert obj["apiVersion"] == "v1" and obj["kind"] == "Pod"
    assert obj["metadata"] == {"name": "p"}
    assert obj["spec"]["containers"] == [{"name": "main", "image": "busybox"}]
    assert obj["spec"]["terminationGracePeriodSeconds"] == 0
    assert "hostNetwork" not in obj["spec"]
    assert obj["spec"]["volumes"] == [{"name": "cfg", "configMap": {"name": "settings"}}]


def test_delete_options_keep_a_zero_grace_period():
    opts = pb._classes()[f"{pb.META}.DeleteOptions"]()
    opts.gracePeriodSeconds = 0
    opts.propagationPolicy = "Foreground"
    obj = pb.decode(body("meta.k8s.io/v1", "DeleteOptions", opts))
    assert obj["gracePeriodSeconds"] == 0 and obj["propagationPolicy"] == "Foreground"


def test_what_it_cannot_decode():
    with pytest.raises(pb.BodyError) as err:
        pb.decode(b"{}")
    assert err.value.status == 400
    crd = pb._classes()[f"{pb.META}.Status"]()  # any message: the kind is what is refused
    with pytest.raises(pb.BodyError) as err:
        pb.decode(body("kubeflow.org/v1", "PyTorchJob", crd))
    assert err.value.status == 415 and err.value.message.startswith("the body of the request was in an unknown")
    with pytest.raises(pb.BodyError) as err:
        pb.decode(pb.MAGIC + b"\xff\xff\xff")
    assert err.value.status == 400
