"""py-spy from an image of the user's (`--image`, `stacks_image`) when the training image has none:
an ephemeral container added to the pod (`pods/ephemeralcontainers`, as `kubectl debug --target`
does) with `targetContainerName` the training container, so that it sees its processes, and the
`SYS_PTRACE` capability py-spy needs to attach. It changes the pod (an ephemeral container cannot
be removed; it ends by itself after `LIFETIME` seconds): read-only mode refuses it before this is
called. Refusals are one line: the RBAC verb, Pod Security, a container that does not start.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import orjson

from monitors import api_paths
from monitors.connection import ConnectionProblem, ExitCode
from monitors.kube import ApiProblem, KubeClient
from monitors.sanitize import clean

from ..exec_bridge import ExecError

LIFETIME = 900  # s: how long the debug container stays (its `sleep`); it is never restarted
STRATEGIC = "application/strategic-merge-patch+json"


def target_container(pod: dict[str, Any]) -> str:
    """The training container: the pod's default container (kubectl's annotation), else its first."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    names = [c.get("name") for c in spec.get("containers") or () if isinstance(c, dict) and c.get("name")]
    wanted = (meta.get("annotations") or {}).get("kubectl.kubernetes.io/default-container")
    return str(wanted if wanted in names else names[0] if names else "")


def container_spec(name: str, image: str, target: str) -> dict[str, Any]:
    return {"name": name, "image": image, "command": ["sleep", str(LIFETIME)], "targetContainerName": target,
            "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}, "terminationMessagePolicy": "File",
            "stdin": False, "tty": False}


def _refusal(problem: ApiProblem, who: str, namespace: str) -> ExecError:
    if problem.status == 403 and "podsecurity" not in problem.message.lower():
        return ExecError(f'forbidden: {who} cannot patch pods/ephemeralcontainers in the namespace "{namespace}" '
                         "(RBAC: ask for the verb patch on pods/ephemeralcontainers, or add py-spy to the image)",
                         ExitCode.FORBIDDEN)
    if "podsecurity" in problem.message.lower() or "sys_ptrace" in problem.message.lower():
        return ExecError(f"the namespace's Pod Security level forbids the debug container's SYS_PTRACE "
                         f"({clean(problem.message, limit=200)}): add py-spy to the training image instead",
                         problem.exit_code)
    if problem.status == 404:
        return ExecError("this cluster has no ephemeral containers (pods/ephemeralcontainers not found): "
                         "add py-spy to the training image", ExitCode.ERROR)
    return ExecError(f"the debug container was refused: {clean(problem.one_line(), limit=300)}", problem.exit_code)


def _state(pod: dict[str, Any], name: str) -> dict[str, Any]:
    for s in (pod.get("status") or {}).get("ephemeralContainerStatuses") or ():
        if isinstance(s, dict) and s.get("name") == name:
            state = s.get("state")
            return state if isinstance(state, dict) else {}
    return {}


async def add(client: KubeClient, namespace: str, pod: str, image: str, timeout: float | None) -> str:
    """The name of a running debug container added to `pod` (ExecError: refused, or not running
    within `timeout` seconds, 60 without one)."""
    who = client.cfg.impersonate_user or client.cfg.user or "you"
    try:
        current = await client.get(api_paths.pod(namespace, pod))
        target = target_container(current)
        name = f"ranks-stacks-{secrets.token_hex(3)}"
        body = {"spec": {"ephemeralContainers": [container_spec(name, image, target)]}}
        await client.request("PATCH", api_paths.pod(namespace, pod, "ephemeralcontainers"), body=orjson.dumps(body),
                             content_type=STRATEGIC)
    except ApiProblem as exc:
        raise _refusal(exc, who, namespace) from None
    except ConnectionProblem as exc:
        raise ExecError(exc.message, exc.code) from None
    deadline = time.monotonic() + (timeout or 60.0)
    while True:
        try:
            state = _state(await client.get(api_paths.pod(namespace, pod)), name)
        except ApiProblem as exc:
            raise ExecError(exc.one_line(), exc.exit_code) from None
        if "running" in state:
            return name
        ended = state.get("terminated") or {}
        waiting = state.get("waiting") or {}
        if ended or waiting.get("reason") in ("ErrImagePull", "ImagePullBackOff", "InvalidImageName",
                                               "CreateContainerError", "RunContainerError"):
            said = clean(ended.get("message") or ended.get("reason") or waiting.get("message")
                         or waiting.get("reason"), limit=200)
            raise ExecError(f"the debug container ({clean(image, limit=100)}) did not run in {pod}: {said}")
        if time.monotonic() > deadline:
            raise ExecError(f"the debug container ({clean(image, limit=100)}) did not start in {pod} "
                            f"within {timeout or 60.0:g}s")
        await asyncio.sleep(0.3)
