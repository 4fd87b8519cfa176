"""Create a job from a `SubmitSpec`: validated first, never over an existing workload, and nothing
left behind when it fails.

- Everything that can be checked locally is (`manifests.validate`), before any request.
- A Kubeflow job of any kind with the same name in the namespace is an error: a new one would
  clash with its pods and Services (`NAME-worker-0`). The server's 409 AlreadyExists (a job created
  between the check and the create) is reported the same way. Nothing is ever replaced.
- The server's refusal (RBAC, a missing namespace or CRD, a rejected field, an admission webhook)
  becomes one line with its message and the matching exit code.
- When the create's outcome is unknown (the connection dropped or timed out after sending it),
  the job is looked up by the `ranks/submit-id` annotation this submit put on it and deleted if it
  was created, so a failed submit leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import uuid
from typing import Any

import orjson

from monitors.connection import ConnectionProblem, ExitCode
from monitors.kube import ApiProblem, KubeClient

from .errors import SessionError
from .manifests import FRAMEWORKS, Framework, SubmitSpec, render

SUBMIT_ID = "ranks/submit-id"
CLEANUP_WINDOW = 5.0  # seconds to watch for a create whose answer was lost


def ref(fw: Framework, name: str) -> str:
    return f"{fw.kind.lower()} \"{name}\""


async def existing(client: KubeClient, namespace: str, name: str) -> list[Framework]:
    """The Kubeflow kinds that already have a job `name` in `namespace` (unknown ones skipped:
    a kind the cluster does not serve answers 404, one we may not read 403)."""

    async def one(fw: Framework) -> Framework | None:
        try:
            await client.get(fw.path(namespace, name))
        except ApiProblem as exc:
            if exc.status in (403, 404):
                return None
            raise SessionError(f"cannot check whether {ref(fw, name)} exists: {exc.one_line()}",
                               exc.exit_code) from None
        return fw

    found = await asyncio.gather(*(one(fw) for fw in FRAMEWORKS.values()))
    return [fw for fw in found if fw is not None]


def already_exists(spec: SubmitSpec, other: Framework | None = None) -> SessionError:
    fw = spec.fw
    if other is None or other is fw:
        why = f"{ref(fw, spec.name)} already exists in {spec.namespace}"
    else:
        why = (f"{ref(other, spec.name)} already exists in {spec.namespace} (a {fw.kind} of the same name "
               "would clash with its pods and Services)")
    return SessionError(f"{why}; choose another name (ranks submit never replaces a workload)", ExitCode.ERROR)


def create_error(exc: ApiProblem, spec: SubmitSpec) -> SessionError:
    fw = spec.fw
    text = exc.message.strip() or exc.reason
    if exc.status == 409:
        return already_exists(spec)
    if exc.status == 403:
        return SessionError(text if "forbidden" in text.lower() else f"forbidden: {text}", ExitCode.FORBIDDEN)
    if exc.status == 401:
        return SessionError(exc.one_line(), ExitCode.UNAUTHORIZED)
    if exc.status == 404:
        if text.startswith('namespaces "'):
            return SessionError(f'namespace "{spec.namespace}" not found', ExitCode.NOT_FOUND)
        operator = "the MPI operator (v2beta1)" if fw.name == "mpi" else "the Kubeflow training operator"
        return SessionError(f"the cluster does not serve {fw.plural}.kubeflow.org/{fw.version}: "
                            f"is {operator} installed?", ExitCode.NOT_FOUND)
    if exc.status in (400, 422):
        return SessionError(f"the server rejected {ref(fw, spec.name)}: {text}", ExitCode.ERROR)
    return SessionError(f"the server refused to create {ref(fw, spec.name)}: {exc.reason}: {text}", ExitCode.ERROR)


async def submit(client: KubeClient, spec: SubmitSpec, *, dry_run: bool = False,
                 create_timeout: float | None = None, cleanup_window: float = CLEANUP_WINDOW) -> dict[str, Any]:
    """Create the job for `spec` and return it as the server stored it (with `dry_run`, return
    the manifest and create nothing). Raises SessionError (one line, exit code)."""
    manifest = render(spec)
    if dry_run:
        return manifest
    fw = spec.fw
    clash = await existing(client, spec.namespace, spec.name)
    if clash:
        raise already_exists(spec, fw if fw in clash else clash[0])
    submit_id = uuid.uuid4().hex
    body = copy.deepcopy(manifest)
    body["metadata"].setdefault("annotations", {})[SUBMIT_ID] = submit_id
    try:
        raw = await client.request("POST", fw.collection_path(spec.namespace), body=body, timeout=create_timeout)
    except ApiProblem as exc:
        raise create_error(exc, spec) from None
    except (ConnectionProblem, TimeoutError) as exc:
        why = exc.message if isinstance(exc, ConnectionProblem) else "timed out"
        after = await remove_if_created(client, spec, submit_id, cleanup_window)
        raise SessionError(f"creating {ref(fw, spec.name)} failed: {why}; {after}",
                           exc.code if isinstance(exc, ConnectionProblem) else ExitCode.UNREACHABLE) from None
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await asyncio.shield(remove_if_created(client, spec, submit_id, cleanup_window))
        raise
    created: dict[str, Any] = orjson.loads(raw)
    return created


async def remove_if_created(client: KubeClient, spec: SubmitSpec, submit_id: str, window: float) -> str:
    """After a create whose answer was lost: watch for the job for `window` seconds and delete it
    if it is ours (our submit-id). Says what happened, for the error message."""
    fw = spec.fw
    path = fw.path(spec.namespace, spec.name)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + window
    confirmed_absent = False
    while True:
        left = deadline - loop.time()
        try:
            obj = await client.get(path, timeout=max(left, 3.0))
        except ApiProblem as exc:
            confirmed_absent = exc.status == 404
        except (ConnectionProblem, TimeoutError):
            pass  # no answer: what we knew still holds
        else:
            if ((obj.get("metadata") or {}).get("annotations") or {}).get(SUBMIT_ID) != submit_id:
                return f"{ref(fw, spec.name)} now exists but was created by someone else; it was left alone"
            try:
                await client.request("DELETE", path, params={"propagationPolicy": "Background"},
                                     timeout=max(deadline - loop.time(), 5.0))
            except ApiProblem as exc:
                if exc.status == 404:
                    return "the job it created was removed"
                return (f"it was created and could not be removed ({exc.one_line()}): "
                        f"delete it with 'ranks delete {spec.name} -p {spec.namespace}'")
            except (ConnectionProblem, TimeoutError):
                return (f"it may have been created: check with 'ranks get {spec.name} -p {spec.namespace}' "
                        f"(annotation {SUBMIT_ID}={submit_id})")
            return "the job it created was removed"
        if loop.time() >= deadline:
            break
        await asyncio.sleep(min(0.25, max(deadline - loop.time(), 0)))
    if confirmed_absent:
        return "nothing was created"
    return (f"it may have been created: check with 'ranks get {spec.name} -p {spec.namespace}' "
            f"(annotation {SUBMIT_ID}={submit_id})")
