"""Ephemeral containers: the `pods/ephemeralcontainers` subresource (what `kubectl debug --target`
patches) and their processes.

GET answers the pod; PATCH (strategic merge, merge or JSON patch, as kubectl sends) and PUT change
only `spec.ephemeralContainers`, checked as the API server does (and Pod Security's `enforce` level of
its namespace, for the capabilities it adds): an ephemeral container is only
ever added (one that exists may not be changed or removed), its name is the pod's alone, it names
an image, and its `targetContainerName` is one of the pod's containers. The kubelet then starts each
new one as a process of the pod (in the pod's namespaces, `PodRuntime.command`: it sees the target's
processes, as a container sharing the target's process namespace does), with the sandbox's PATH,
HOSTNAME and HOME and its own `env`, and reports it in `status.ephemeralContainerStatuses`
(waiting, running, terminated with its exit code). It stops with the pod; exec reaches it by name;
one started with `stdin` (`kubectl debug -i`, `-it`: a terminal) is attached to through `pods/attach`
(`attach`).
The image is not pulled (simcluster runs the pod's view of the host, as for every container).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from ..apiserver.errors import ApiError
from ..apiserver.patch import PatchError, apply_patch
from ..apiserver.store import now_rfc3339
from .attach import Console, console_for
from .exec import _tty_child_setup
from .podnet import joiner
from .reaper import pdeathsig_preexec

if TYPE_CHECKING:
    from ..apiserver.server import Ctx
    from ..cluster import SimCluster
    from .podruntime import PodRuntime

POD_KEY = ("", "pods")
RUNNING: set[asyncio.Future[None]] = set()  # the runs being followed (a reference kept to each)


@dataclass
class EphemeralRun:
    """An ephemeral container's one run (it is never restarted)."""

    name: str
    env: dict[str, str]
    pid: int | None = None
    running: bool = False
    console: Console | None = None  # its stdio, when it was started with stdin (`attach`)


def _names(pod: dict[str, Any], field: str) -> list[str]:
    return [c.get("name", "") for c in (pod.get("spec") or {}).get(field) or () if isinstance(c, dict)]


def check(pod: dict[str, Any], new: Any) -> list[dict[str, Any]]:
    """`new` as the pod's ephemeral containers, or the API server's 422."""
    name = pod["metadata"]["name"]

    def invalid(field: str, why: str) -> ApiError:
        return ApiError(422, f'Pod "{name}" is invalid: {field}: {why}', reason="Invalid",
                        details={"name": name, "kind": "Pod"})

    if not isinstance(new, list) or not all(isinstance(c, dict) for c in new):
        raise invalid("spec.ephemeralContainers", "Invalid value: must be a list of containers")
    old = {c.get("name"): c for c in (pod.get("spec") or {}).get("ephemeralContainers") or () if isinstance(c, dict)}
    given = {c.get("name"): c for c in new}
    for old_name, c in old.items():
        if given.get(old_name) != c:
            raise invalid("spec.ephemeralContainers", f'Forbidden: existing ephemeral containers "{old_name}" may '
                          "not be changed")
    taken = set(_names(pod, "containers")) | set(_names(pod, "initContainers"))
    seen: set[str] = set()
    for i, c in enumerate(new):
        field = f"spec.ephemeralContainers[{i}]"
        cname = c.get("name")
        if not isinstance(cname, str) or not cname:
            raise invalid(f"{field}.name", "Required value")
        if cname in taken or cname in seen:
            raise invalid(f"{field}.name", f'Duplicate value: "{cname}"')
        seen.add(cname)
        if not isinstance(c.get("image"), str) or not c["image"]:
            raise invalid(f"{field}.image", "Required value")
        target = c.get("targetContainerName")
        if target is not None and target not in _names(pod, "containers"):
            raise invalid(f"{field}.targetContainerName", f'Not found: "{target}"')
        for forbidden in ("ports", "resources", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle"):
            if c.get(forbidden):
                raise invalid(f"{field}.{forbidden}", "Forbidden: cannot be set for an Ephemeral Container")
    return new


ENFORCE = "pod-security.kubernetes.io/enforce"
# Pod Security's baseline: the capabilities a container may add (restricted: only NET_BIND_SERVICE)
BASELINE_CAPS = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                           "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})


def pod_security(sim: SimCluster, pod: dict[str, Any], added: list[dict[str, Any]]) -> None:
    """Pod Security admission for the ephemeral containers `added` (its `enforce` level on the
    pod's namespace, baseline or restricted): a capability beyond the level's is forbidden (403)."""
    ns = sim.store.find(("", "namespaces"), "", pod["metadata"].get("namespace", ""))
    level = ((ns.obj.get("metadata") or {}).get("labels") or {}).get(ENFORCE, "privileged") if ns else "privileged"
    if level not in ("baseline", "restricted"):
        return
    allowed = BASELINE_CAPS if level == "baseline" else frozenset({"NET_BIND_SERVICE"})
    for c in added:
        caps = ((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or []
        bad = [str(cap) for cap in caps if str(cap).upper().removeprefix("CAP_") not in allowed]
        if bad:
            listed = ", ".join(f'"{b}"' for b in bad)
            raise ApiError(403, f'pods "{pod["metadata"]["name"]}" is forbidden: violates PodSecurity '
                                f'"{level}:latest": non-default capabilities (container "{c["name"]}" must not '
                                f"include {listed} in securityContext.capabilities.add)", reason="Forbidden",
                           details={"name": pod["metadata"]["name"], "kind": "pods"})


async def serve(sim: SimCluster, ctx: Ctx) -> web.StreamResponse:
    from ..apiserver.messages import decode_body, json_response

    ns, name = ctx.namespace or "default", ctx.name or ""
    cur = sim.store.find(POD_KEY, ns, name)
    if cur is None:
        raise ApiError(404, f'pods "{name}" not found', reason="NotFound", details={"name": name, "kind": "pods"})
    method = ctx.request.method
    if method == "GET":
        return json_response(cur.obj)
    raw = await ctx.request.read()
    if method == "PUT":
        body = decode_body(raw, ctx.request.headers.get("Content-Type", ""))
    elif method == "PATCH":
        try:
            body = apply_patch(cur.obj, orjson.loads(raw), (ctx.request.content_type or "").lower())
        except orjson.JSONDecodeError as exc:
            raise ApiError(400, f"error decoding patch: {exc}") from None
        except PatchError as exc:
            raise ApiError(exc.status, str(exc)) from None
    else:
        raise ApiError(405, f"the server does not allow this method on the requested resource ({method})")
    if not isinstance(body, dict):
        raise ApiError(400, "the body of the request was not a Pod")
    wanted = check(cur.obj, copy.deepcopy((body.get("spec") or {}).get("ephemeralContainers") or []))
    pod_security(sim, cur.obj, [c for c in wanted if c["name"] not in set(_names(cur.obj, "ephemeralContainers"))])
    new = copy.deepcopy(cur.obj)
    new["spec"]["ephemeralContainers"] = wanted
    if ctx.request.query.get("dryRun") == "All":
        return json_response(new)
    st = sim.store.update(ctx.rt, new)
    started = set(_names(cur.obj, "ephemeralContainers"))
    for c in wanted:
        if c["name"] not in started:
            task = asyncio.ensure_future(run(sim, ns, name, c))
            RUNNING.add(task)
            task.add_done_callback(RUNNING.discard)
    return json_response(st.obj)


def _status(sim: SimCluster, ns: str, pod: str, uid: str, entry: dict[str, Any]) -> None:
    rt = sim.registry.get("", "v1", "pods")
    if rt is None:
        return

    def fn(obj: dict[str, Any]) -> None:
        if obj["metadata"].get("uid") != uid:
            return
        status = obj.setdefault("status", {})
        kept = [s for s in status.get("ephemeralContainerStatuses") or () if s.get("name") != entry["name"]]
        status["ephemeralContainerStatuses"] = [*kept, entry]

    with contextlib.suppress(ApiError):
        sim.store.mutate(rt, ns, pod, fn)


def _entry(c: dict[str, Any], state: dict[str, Any], ready: bool = False) -> dict[str, Any]:
    return {"name": c["name"], "image": c["image"], "imageID": "", "ready": ready, "restartCount": 0,
            "state": state, "lastState": {}}


async def run(sim: SimCluster, ns: str, pod: str, c: dict[str, Any]) -> None:
    """Start the ephemeral container `c` in the pod's runtime; its status follows its one run."""
    kubelet = sim.kubelet
    rt: PodRuntime | None = kubelet.runtime(ns, pod) if kubelet is not None else None
    if rt is None:
        return
    uid = rt.uid
    argv = [str(a) for a in [*(c.get("command") or ()), *(c.get("args") or ())]] or ["sh"]
    env = {**rt.sandbox.base_env(), **{str(e.get("name")): str(e.get("value", "")) for e in c.get("env") or ()
                                       if isinstance(e, dict) and e.get("name")}}
    cwd = rt.working_dir("")
    _status(sim, ns, pod, uid, _entry(c, {"waiting": {"reason": "ContainerCreating"}}))
    found = rt.find_executable(argv[0], env, cwd) if "/" not in argv[0] else argv[0]
    if found is None:
        why = f'exec: "{argv[0]}": executable file not found in $PATH'
        _status(sim, ns, pod, uid, _entry(c, {"terminated": {"exitCode": 128, "reason": "StartError",
                                                              "message": why, "finishedAt": now_rfc3339()}}))
        return
    full, root = [found, *argv[1:]], cwd
    if rt.holder is not None:
        full, root = rt.command(full, cwd)
    console = console_for(c)  # (stdin: kubectl debug -i attaches to it; tty: -t, a terminal of its own)
    run_ = EphemeralRun(c["name"], env, console=console)
    stdio: tuple[int, int, int] = console.child_stdio() if console is not None else (
        subprocess.DEVNULL, subprocess.DEVNULL, subprocess.DEVNULL)
    try:
        proc = subprocess.Popen(full, executable=full[0], cwd=root, env=env, stdin=stdio[0], stdout=stdio[1],
                                stderr=stdio[2], start_new_session=True, close_fds=True,
                                preexec_fn=joiner(rt.cgroup, _tty_child_setup() if console is not None and console.tty
                                                  else pdeathsig_preexec()))
    except OSError as exc:
        if console is not None:
            console.spawned()
            console.close()
        _status(sim, ns, pod, uid, _entry(c, {"terminated": {"exitCode": 128, "reason": "StartError",
                                                              "message": str(exc), "finishedAt": now_rfc3339()}}))
        return
    if console is not None:
        console.spawned()
    rt.register_child(proc.pid)
    run_.pid, run_.running = proc.pid, True
    rt.ephemeral[c["name"]] = run_
    started = now_rfc3339()
    _status(sim, ns, pod, uid, _entry(c, {"running": {"startedAt": started}}))
    try:
        while proc.poll() is None:
            await asyncio.sleep(0.2)
    finally:
        run_.running = False
        rt.unregister_child(proc.pid)
        if console is not None:
            await asyncio.sleep(0.1)  # (what it wrote last reaches the attached clients first)
            console.close()
    code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    _status(sim, ns, pod, uid, _entry(c, {"terminated": {
        "exitCode": code, "reason": "Completed" if code == 0 else "Error", "startedAt": started,
        "finishedAt": now_rfc3339()}}))


def install(sim: SimCluster) -> None:
    async def handler(ctx: Ctx) -> web.StreamResponse:
        return await serve(sim, ctx)

    sim.server.subresources["pods/ephemeralcontainers"] = handler

    async def stop() -> None:  # (their processes die with their pods; only the following stops)
        for task in list(RUNNING):
            task.cancel()
        for task in list(RUNNING):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    sim.on_stop(stop)
