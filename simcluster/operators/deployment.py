"""The apps/v1 Deployment and ReplicaSet controllers of kube-controller-manager, and the
`deployments/scale` and `replicasets/scale` subresources (autoscaling/v1 Scale).

Enough for kubectl's typed commands (`create deployment`, `scale`, `rollout status`, `get`) and
clients that watch them:

- Deployment: one ReplicaSet per pod template, named `<deployment>-<pod-template-hash>` (the hash
  as `controller.ComputeHash` encodes it: FNV-32a, `rand.SafeEncodeString`), with the
  `pod-template-hash` label on its selector, template and pods and the
  `deployment.kubernetes.io/revision` annotation. A changed template gets a new ReplicaSet (the
  next revision) and the old ones are scaled to 0 at once (simplification: no surge/unavailable
  pacing); `revisionHistoryLimit` old, empty ReplicaSets are kept. Status: `observedGeneration`,
  `replicas`, `updatedReplicas`, `readyReplicas`, `availableReplicas`, `unavailableReplicas`,
  `terminatingReplicas` and the `Available`/`Progressing` conditions with the real reasons and
  messages; events `ScalingReplicaSet` as the real controller words them. `paused` stops
  reconciling the template; `minReadySeconds` counts ready as available.
- ReplicaSet: keeps `spec.replicas` active pods (`<rs>-<5 chars>`, controller ownerReference),
  deleting not-ready and newest pods first when scaling down; status `replicas` (active pods),
  `fullyLabeledReplicas`, `readyReplicas`, `availableReplicas`, `terminatingReplicas`,
  `observedGeneration`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from ..apiserver.errors import ApiError
from ..apiserver.patch import PatchError, apply_patch
from ..apiserver.store import Event, TypeKey
from ..controllers.base import Controller, EventRecorder, Key, event_keys, keys_of
from .common import (
    POD_KEY,
    TERMINAL_PHASES,
    api_create,
    api_delete,
    as_dict,
    as_list,
    deleting,
    is_active,
    is_int,
    label_selector_string,
    now,
    owned,
    phase,
    pod_ready,
    rtype,
    write_status,
)

if TYPE_CHECKING:
    from ..apiserver.server import Ctx
    from ..cluster import SimCluster

DEPLOYMENT_KEY: TypeKey = ("apps", "deployments")
REPLICASET_KEY: TypeKey = ("apps", "replicasets")
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand alphanums


def template_hash(template: dict[str, Any], collisions: int = 0) -> str:
    """A stable short hash of a pod template, in the alphabet the real controller uses."""
    h = 0x811C9DC5
    data = orjson.dumps(template, option=orjson.OPT_SORT_KEYS) + (str(collisions).encode() if collisions else b"")
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[ord(c) % len(_SAFE)] for c in str(h))


def _without_hash(template: dict[str, Any]) -> dict[str, Any]:
    t = copy.deepcopy(template)
    labels = as_dict(as_dict(t.get("metadata")).get("labels"))
    labels.pop(HASH_LABEL, None)
    return t


def _cond(ctype: str, status: str, reason: str, message: str, old: list[Any]) -> dict[str, Any]:
    t = now()
    prev = next((c for c in old if isinstance(c, dict) and c.get("type") == ctype), None)
    kept = prev is not None and prev.get("status") == status
    return {"type": ctype, "status": status, "lastUpdateTime": t,
            "lastTransitionTime": prev.get("lastTransitionTime", t) if prev is not None and kept else t,
            "reason": reason, "message": message}


def _percent(value: Any, total: int, round_up: bool) -> int:
    if is_int(value):
        return int(value)
    text = str(value or "0")
    if text.endswith("%") and text[:-1].isdigit():
        n = int(text[:-1]) * total
        return -(-n // 100) if round_up else n // 100
    return 0


class ReplicaSetController(Controller):
    name = "replicaset-controller"
    watches = (REPLICASET_KEY, POD_KEY)

    def __init__(self, sim: SimCluster) -> None:
        super().__init__(sim)
        self.events = EventRecorder(sim, "replicaset-controller")

    def initial_keys(self) -> Iterable[Key]:
        return keys_of(self.store, REPLICASET_KEY)

    def keys_for(self, ev: Event) -> Iterable[Key]:
        return event_keys(ev, REPLICASET_KEY, "ReplicaSet", "apps")

    async def reconcile(self, key: Key) -> None:
        ns, name = key
        st = self.store.find(REPLICASET_KEY, ns, name)
        if st is None or deleting(st.obj) or not isinstance(st.obj.get("spec"), dict):
            return
        rs = st.obj
        spec = rs["spec"]
        want = spec.get("replicas", 1)
        want = int(want) if is_int(want) and want >= 0 else 1
        pods = owned(self.sim, rs["metadata"]["uid"], POD_KEY)
        active = [p for p in pods if is_active(p)]
        pod_rt = rtype(self.sim, "", "v1", "pods")
        if len(active) < want:
            for _ in range(want - len(active)):
                pod = self._create_pod(rs)
                if pod is None:
                    break
                active.append(pod)
        elif len(active) > want:
            # not ready first, then the newest (ActivePodsWithRanks, simplified)
            doomed = sorted(active, key=lambda p: (pod_ready(p), _neg(p["metadata"].get("creationTimestamp", ""))))
            doomed = doomed[: len(active) - want]
            for p in doomed:
                if api_delete(self.sim, pod_rt, p):
                    self.events.event(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {p['metadata']['name']}")
            gone = {p["metadata"]["name"] for p in doomed}
            active = [p for p in active if p["metadata"]["name"] not in gone]
        tmpl_labels = as_dict(as_dict(as_dict(spec.get("template")).get("metadata")).get("labels"))
        ready = sum(1 for p in active if pod_ready(p))
        status: dict[str, Any] = {
            "replicas": len(active),
            "fullyLabeledReplicas": sum(
                1 for p in active
                if all(as_dict(p["metadata"].get("labels")).get(k) == v for k, v in tmpl_labels.items())),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "terminatingReplicas": sum(1 for p in pods if deleting(p) and phase(p) not in TERMINAL_PHASES),
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        for k in ("readyReplicas", "availableReplicas", "terminatingReplicas"):
            if not status[k]:
                del status[k]
        write_status(self.sim, rtype(self.sim, "apps", "v1", "replicasets"), rs, status)

    def _create_pod(self, rs: dict[str, Any]) -> dict[str, Any] | None:
        meta = rs["metadata"]
        tmpl = copy.deepcopy(as_dict(rs["spec"].get("template")))
        tmeta = as_dict(tmpl.get("metadata"))
        prefix = f"{meta['name']}-"
        pod_meta: dict[str, Any] = {
            "name": self.store.generate_name(prefix),
            "generateName": prefix,
            "namespace": meta.get("namespace", ""),
            "labels": dict(as_dict(tmeta.get("labels"))),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": meta["name"],
                                 "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}],
        }
        if tmeta.get("annotations"):
            pod_meta["annotations"] = dict(as_dict(tmeta["annotations"]))
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": as_dict(tmpl.get("spec"))}
        try:
            st = api_create(self.sim, rtype(self.sim, "", "v1", "pods"), pod)
        except ApiError as err:
            self.events.event(rs, "Warning", "FailedCreate", f"Error creating: {err.message}")
            return None
        self.events.event(rs, "Normal", "SuccessfulCreate", f"Created pod: {st.obj['metadata']['name']}")
        return st.obj


def _neg(stamp: str) -> str:
    """Sorts RFC 3339 stamps newest first."""
    return "".join(chr(0x10FFFF - ord(c)) for c in stamp)


class DeploymentController(Controller):
    name = "deployment-controller"
    watches = (DEPLOYMENT_KEY, REPLICASET_KEY)

    def __init__(self, sim: SimCluster) -> None:
        super().__init__(sim)
        self.events = EventRecorder(sim, "deployment-controller")

    def initial_keys(self) -> Iterable[Key]:
        return keys_of(self.store, DEPLOYMENT_KEY)

    def keys_for(self, ev: Event) -> Iterable[Key]:
        return event_keys(ev, DEPLOYMENT_KEY, "Deployment", "apps")

    async def reconcile(self, key: Key) -> None:
        ns, name = key
        st = self.store.find(DEPLOYMENT_KEY, ns, name)
        if st is None or deleting(st.obj) or not isinstance(st.obj.get("spec"), dict):
            return
        d = st.obj
        spec = d["spec"]
        want = spec.get("replicas", 1)
        want = int(want) if is_int(want) and want >= 0 else 1
        rs_rt = rtype(self.sim, "apps", "v1", "replicasets")
        sets = owned(self.sim, d["metadata"]["uid"], REPLICASET_KEY)
        template = as_dict(spec.get("template"))
        new = next((rs for rs in sets if _without_hash(as_dict(rs["spec"].get("template"))) == template), None)
        old = [rs for rs in sets if rs is not new]
        revisions = [int(r) for rs in sets if (r := as_dict(rs["metadata"].get("annotations")).get(REVISION, ""))
                     .isdigit()]
        paused = spec.get("paused") is True
        if new is None and not paused:
            new = self._create_rs(d, template, want, max(revisions, default=0) + 1, {rs["metadata"]["name"] for rs
                                                                                    in sets})
            if new is None:
                return
        if new is not None and not paused:
            self._scale(d, rs_rt, new, want)
            for rs in old:
                self._scale(d, rs_rt, rs, 0)
            self._cleanup(d, rs_rt, old)
        self._status(d, new, old, want)

    def _create_rs(self, d: dict[str, Any], template: dict[str, Any], want: int, revision: int,
                   taken: set[str]) -> dict[str, Any] | None:
        meta = d["metadata"]
        collisions = int(as_dict(d.get("status")).get("collisionCount") or 0)
        h = template_hash(template, collisions)
        while f"{meta['name']}-{h}" in taken:
            collisions += 1
            h = template_hash(template, collisions)
        tmpl = copy.deepcopy(template)
        tmpl.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = h
        selector = copy.deepcopy(as_dict(d["spec"].get("selector")))
        selector.setdefault("matchLabels", {})[HASH_LABEL] = h
        surge = _percent(as_dict(as_dict(d["spec"].get("strategy")).get("rollingUpdate")).get("maxSurge", "25%"),
                         want, True)
        rs: dict[str, Any] = {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta['name']}-{h}",
                "namespace": meta.get("namespace", ""),
                "labels": dict(as_dict(tmpl["metadata"].get("labels"))),
                "annotations": {DESIRED: str(want), MAX_REPLICAS: str(want + surge), REVISION: str(revision)},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"],
                                     "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": {"replicas": 0, "minReadySeconds": d["spec"].get("minReadySeconds", 0),
                     "selector": selector, "template": tmpl},
        }
        try:
            st = api_create(self.sim, rtype(self.sim, "apps", "v1", "replicasets"), rs)
        except ApiError as err:
            self.events.event(d, "Warning", "FailedCreate", f"Failed to create new replica set "
                                                            f"\"{rs['metadata']['name']}\": {err.message}")
            return None

        def set_revision(o: dict[str, Any]) -> None:
            o["metadata"].setdefault("annotations", {})[REVISION] = str(revision)

        self.store.mutate(rtype(self.sim, "apps", "v1", "deployments"), meta.get("namespace", ""), meta["name"],
                          set_revision)
        return st.obj

    def _scale(self, d: dict[str, Any], rs_rt: Any, rs: dict[str, Any], want: int) -> None:
        have = rs["spec"].get("replicas", 0)
        if have == want:
            return
        rs_name = rs["metadata"]["name"]

        def fn(o: dict[str, Any]) -> None:
            o["spec"]["replicas"] = want
            o["metadata"].setdefault("annotations", {})[DESIRED] = str(d["spec"].get("replicas", 1))

        self.store.mutate(rs_rt, rs["metadata"].get("namespace", ""), rs_name, fn)
        direction = "up" if want > int(have or 0) else "down"
        self.events.event(d, "Normal", "ScalingReplicaSet",
                          f"Scaled {direction} replica set {rs_name} from {have} to {want}")

    def _cleanup(self, d: dict[str, Any], rs_rt: Any, old: list[dict[str, Any]]) -> None:
        limit = d["spec"].get("revisionHistoryLimit", 10)
        limit = int(limit) if is_int(limit) and limit >= 0 else 10
        empty = [rs for rs in old if not as_dict(rs.get("status")).get("replicas") and not rs["spec"].get("replicas")]
        empty.sort(key=lambda rs: int(as_dict(rs["metadata"].get("annotations")).get(REVISION, "0") or 0))
        for rs in empty[: max(0, len(empty) - limit)]:
            api_delete(self.sim, rs_rt, rs)

    def _status(self, d: dict[str, Any], new: dict[str, Any] | None, old: list[dict[str, Any]], want: int) -> None:
        def count(rs: dict[str, Any] | None, field: str) -> int:
            return int(as_dict((rs or {}).get("status")).get(field) or 0)

        sets = ([new] if new is not None else []) + old
        # the store's latest copies (the writes above changed specs, not these dicts' statuses)
        fresh = []
        for rs in sets:
            cur = self.store.find(REPLICASET_KEY, rs["metadata"].get("namespace", ""), rs["metadata"]["name"])
            fresh.append(cur.obj if cur is not None else rs)
        new_fresh = fresh[0] if new is not None else None
        replicas = sum(count(rs, "replicas") for rs in fresh)
        available = sum(count(rs, "availableReplicas") for rs in fresh)
        ready = sum(count(rs, "readyReplicas") for rs in fresh)
        updated = count(new_fresh, "replicas")
        unavailable = max(0, want - available)
        terminating = sum(count(rs, "terminatingReplicas") for rs in fresh)
        old_status = as_dict(d.get("status"))
        old_conds = as_list(old_status.get("conditions"))
        max_unavailable = _percent(
            as_dict(as_dict(d["spec"].get("strategy")).get("rollingUpdate")).get("maxUnavailable", "25%"), want, False)
        conds = []
        if available >= want - max_unavailable:
            conds.append(_cond("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.",
                               old_conds))
        else:
            conds.append(_cond("Available", "False", "MinimumReplicasUnavailable",
                               "Deployment does not have minimum availability.", old_conds))
        rs_name = new["metadata"]["name"] if new is not None else ""
        if d["spec"].get("paused") is True:
            conds.append(_cond("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused", old_conds))
        elif new is not None and updated == want and available >= want and replicas == updated:
            conds.append(_cond("Progressing", "True", "NewReplicaSetAvailable",
                               f'ReplicaSet "{rs_name}" has successfully progressed.', old_conds))
        elif new is not None:
            prev = next((c for c in old_conds if isinstance(c, dict) and c.get("type") == "Progressing"), None)
            if prev is None or prev.get("message") == f'Created new replica set "{rs_name}"':
                conds.append(_cond("Progressing", "True", "NewReplicaSetCreated",
                                   f'Created new replica set "{rs_name}"', old_conds))
            else:
                conds.append(_cond("Progressing", "True", "ReplicaSetUpdated",
                                   f'ReplicaSet "{rs_name}" is progressing.', old_conds))
        # keep the transition stamps of unchanged conditions (only lastUpdateTime moves on change)
        merged = []
        for c in conds:
            prev = next((o for o in old_conds if isinstance(o, dict) and o.get("type") == c["type"]), None)
            if prev is not None and all(prev.get(k) == c[k] for k in ("status", "reason", "message")):
                merged.append(prev)
            else:
                merged.append(c)
        status: dict[str, Any] = {
            "observedGeneration": d["metadata"].get("generation", 1),
            "replicas": replicas, "updatedReplicas": updated, "readyReplicas": ready,
            "availableReplicas": available, "unavailableReplicas": unavailable,
            "terminatingReplicas": terminating, "conditions": merged,
        }
        for k in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas",
                  "terminatingReplicas"):
            if not status[k]:
                del status[k]
        if old_status.get("collisionCount"):
            status["collisionCount"] = old_status["collisionCount"]
        write_status(self.sim, rtype(self.sim, "apps", "v1", "deployments"), d, status)


# -- the scale subresource --------------------------------------------------------------------------


def scale_of(obj: dict[str, Any]) -> dict[str, Any]:
    """autoscaling/v1 Scale of a Deployment or ReplicaSet."""
    meta = obj["metadata"]
    selector = as_dict(as_dict(obj.get("spec")).get("selector"))
    return {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                     if k in meta},
        "spec": {"replicas": as_dict(obj.get("spec")).get("replicas", 0)},
        "status": {"replicas": int(as_dict(obj.get("status")).get("replicas") or 0),
                   "selector": label_selector_string(as_dict(selector.get("matchLabels")))},
    }


async def serve_scale(sim: SimCluster, ctx: Ctx) -> web.StreamResponse:
    """GET, PUT and PATCH of `<deployments|replicasets>/<name>/scale`."""
    from ..apiserver.messages import decode_body, json_response

    rt = ctx.rt
    ns = ctx.namespace or ""
    cur = sim.store.find(rt.key, ns, ctx.name or "")
    if cur is None:
        raise ApiError(404, f'{rt.plural}.{rt.group} "{ctx.name}" not found',
                       details={"name": ctx.name, "group": rt.group, "kind": rt.plural})
    method = ctx.request.method
    if method == "GET":
        return json_response(scale_of(cur.obj))
    raw = await ctx.request.read()
    ctype = (ctx.request.content_type or "").lower()
    if method == "PUT":
        scale = decode_body(raw, ctx.request.headers.get("Content-Type", ""))
    elif method == "PATCH":
        try:
            patch = orjson.loads(raw)
            scale = apply_patch(scale_of(cur.obj), patch, ctype)
        except orjson.JSONDecodeError as exc:
            raise ApiError(400, f"error decoding patch: {exc}") from None
        except PatchError as exc:
            raise ApiError(422, str(exc)) from None
    else:
        raise ApiError(405, f"the server does not allow this method on the requested resource ({method})")
    if not isinstance(scale, dict):
        raise ApiError(400, "the body of the request was not a Scale")
    replicas = as_dict(scale.get("spec")).get("replicas")
    if not is_int(replicas) or replicas < 0:
        raise ApiError(422, f'Scale.autoscaling "{ctx.name}" is invalid: spec.replicas: Invalid value: '
                            f"{replicas}: must be greater than or equal to 0")
    expect = as_dict(scale.get("metadata")).get("resourceVersion") if method == "PUT" else None
    new = copy.deepcopy(cur.obj)
    new["spec"]["replicas"] = int(replicas)
    if ctx.request.query.get("dryRun") == "All":
        return json_response(scale_of(new))
    st = sim.store.update(rt, new, expect_rv=expect or None)
    return json_response(scale_of(st.obj))


def install_scale(sim: SimCluster) -> None:
    async def handler(ctx: Ctx) -> web.StreamResponse:
        return await serve_scale(sim, ctx)

    sim.server.subresources["deployments/scale"] = handler
    sim.server.subresources["replicasets/scale"] = handler
