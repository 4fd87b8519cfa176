"""The CLI commands that change the cluster: submit, delete, suspend, resume (sessions/ does the work).

Each is one line on success, `ranks: error: MESSAGE` and a documented exit code on failure.
Read-only mode (`--read-only`, or `read_only = true` in the config file) refuses each of them with
exit code 2 before anything is sent; `submit --dry-run` changes nothing and is allowed.
"""

from __future__ import annotations

import sys
from typing import Any

from monitors.connection import ClusterConfig, ExitCode
from monitors.kube import ApiProblem, KubeClient, seg
from monitors.monitor import Monitor
from monitors.views import WorkloadView
from sessions.errors import SessionError
from sessions.lifecycle import Target, refuse_if_read_only, set_suspended, target_of
from sessions.lifecycle import delete as delete_workload
from sessions.manifests import SubmitSpec, spec_problems
from sessions.submit import submit

from .cli_commands import UserError, _error, _pick, _run, resolve_project, search_namespace
from .cli_output import emit_structured


def _user_error(exc: SessionError) -> UserError:
    try:
        code = ExitCode(exc.code)
    except ValueError:
        code = ExitCode.ERROR
    return UserError(exc.message, code)


def read_only_reason(opts: dict[str, Any]) -> str | None:
    """Why read-only mode is on (the flag, or the config file that says so), or None when off."""
    if opts.get("read_only"):
        return "--read-only"
    from .config_file import ConfigReadError, read_only_setting

    try:
        read_only, path = read_only_setting()
    except ConfigReadError as exc:
        raise UserError(str(exc), ExitCode.NO_CONFIG) from None
    if read_only:
        return f"read_only = true in {path}"
    return None


def _refuse_if_read_only(opts: dict[str, Any], action: str) -> int | None:
    """The exit code when read-only mode refuses `action` (after printing why), else None."""
    try:
        why = read_only_reason(opts)
        refuse_if_read_only(why is not None, action, why)
    except UserError as exc:
        return _error(exc.message, exc.code)
    except SessionError as exc:
        return _error(exc.message, exc.code)
    return None


async def project_name(client: KubeClient, namespace: str) -> str:
    """The Run:ai project of a namespace (its runai/queue label, else runai-<project>), else the
    namespace itself."""
    try:
        ns = await client.get(f"/api/v1/namespaces/{seg(namespace)}")
    except ApiProblem:
        ns = {}
    labels = (ns.get("metadata") or {}).get("labels") or {}
    for key in ("runai/queue", "kai.scheduler/queue"):
        if labels.get(key):
            return str(labels[key])
    return namespace[len("runai-"):] if namespace.startswith("runai-") else namespace


def spec_from_options(name: str, kw: dict[str, Any]) -> SubmitSpec:
    return SubmitSpec(
        name=name, framework=kw["framework"], image=kw["image"], workers=kw["workers"],
        gpus=kw.get("gpus") or 0, gpu_portion=kw.get("gpu_portion"), slots_per_worker=kw.get("slots_per_worker"),
        cpu=kw.get("cpu"), memory=kw.get("memory"), env=tuple(kw.get("env") or ()),
        volumes=tuple(kw.get("volumes") or ()), node_pool=kw.get("node_pool"),
        interactive=bool(kw.get("interactive")), command=kw.get("command"),
    )


def run_submit(opts: dict[str, Any], *, name: str, project: str | None, dry_run: bool = False,
               output: str | None = None, **kw: Any) -> int:
    """`ranks submit`: validate, render, create (or print with --dry-run). Exit code."""
    if not dry_run:
        refused = _refuse_if_read_only(opts, f"submit {name}")
        if refused is not None:
            return refused
    spec = spec_from_options(name, kw)
    local = [p for p in spec_problems(spec) if p.flag != "--project"]
    if local:  # before touching the cluster
        return _error(local[0].message, ExitCode.USAGE)

    async def body(cfg: ClusterConfig) -> int:
        async with KubeClient(cfg) as client:
            spec.namespace = await resolve_project(client, project) if project else cfg.namespace
            spec.project = await project_name(client, spec.namespace)
            spec.user = cfg.impersonate_user or cfg.user
            try:
                obj = await submit(client, spec, dry_run=dry_run)
            except SessionError as exc:
                raise _user_error(exc) from None
        if dry_run or output:
            emit_structured(obj, output or "yaml")
            return ExitCode.OK
        fw = spec.fw
        where = f" -p {project}" if project else ""
        hint = (f"; when it runs: ranks shell {spec.name}{where}" if spec.interactive
                else f"; follow it: ranks logs {spec.name}{where} -f")
        print(f"{fw.kind.lower()}.kubeflow.org/{spec.name} created in {spec.namespace}{hint}")
        return ExitCode.OK

    return _run(opts, body)


async def find_workload(cfg: ClusterConfig, namespace: str, ref: str) -> WorkloadView:
    """The workload named `ref` (NAME or KIND/NAME) in `namespace`, as the live model groups it."""
    monitor = Monitor(cfg, once=True, events=False, nodes=False, scope=(namespace,))
    try:
        await monitor.start()
        await monitor.wait_synced(timeout=120)
        try:
            return _pick(list(monitor.model.workloads.values()), ref)
        except UserError as exc:
            # may not read there: say so (about pods when that is refused) rather than "not found"
            forbidden = sorted(monitor.status.forbidden.items(), key=lambda kv: (not kv[0].startswith("pods "), kv[0]))
            if exc.code == ExitCode.NOT_FOUND and forbidden:
                raise UserError(f"forbidden: cannot read workloads in {namespace}: {forbidden[0][1]}",
                                ExitCode.FORBIDDEN) from None
            if exc.code == ExitCode.NOT_FOUND:
                raise UserError(f'workload "{ref}" not found in {namespace}', ExitCode.NOT_FOUND) from None
            raise
    finally:
        await monitor.stop()


async def locate_workload(cfg: ClusterConfig, ref: str, project: str | None) -> WorkloadView:
    """The workload `ref`: in the project given (-p), else in the context's namespace, else in
    the one project the user may read that has it (`cli_commands.search_namespace`)."""
    if project:
        async with KubeClient(cfg) as probe:
            return await find_workload(cfg, await resolve_project(probe, project), ref)
    try:
        return await find_workload(cfg, cfg.namespace, ref)
    except UserError as exc:
        if exc.code not in (ExitCode.NOT_FOUND, ExitCode.FORBIDDEN):
            raise
    return await find_workload(cfg, await search_namespace(cfg, ref), ref)


async def _target(cfg: ClusterConfig, ref: str, project: str | None) -> tuple[Target, WorkloadView]:
    wl = await locate_workload(cfg, ref, project)
    try:
        return target_of(wl), wl
    except SessionError as exc:
        raise _user_error(exc) from None


def _confirm(question: str) -> bool:
    import click

    try:
        return click.confirm(question, default=False, err=True)
    except (click.exceptions.Abort, EOFError):
        return False


def run_delete(opts: dict[str, Any], workload: str, project: str | None, yes: bool) -> int:
    """`ranks delete`: asks on a terminal unless --yes; without a terminal, --yes is required."""
    refused = _refuse_if_read_only(opts, f"delete {workload}")
    if refused is not None:
        return refused
    if not yes and not sys.stdin.isatty():
        return _error(f"refusing to delete {workload} without confirmation: stdin is not a terminal; "
                      "pass --yes to delete", ExitCode.USAGE)

    async def body(cfg: ClusterConfig) -> int:
        target, wl = await _target(cfg, workload, project)
        if not yes:
            what = "interactive session" if wl.interactive else "workload"
            pods = f", {len(wl.ranks)} pod{'s' if len(wl.ranks) != 1 else ''}" if wl.ranks else ""
            if not _confirm(f"Delete {what} {target.ref} in {target.namespace} ({wl.status}{pods})?"):
                print(f"ranks: {target.ref} not deleted", file=sys.stderr)
                return ExitCode.ERROR
        async with KubeClient(cfg) as client:
            try:
                await delete_workload(client, target)
            except SessionError as exc:
                raise _user_error(exc) from None
        print(f"{target.ref} deleted from {target.namespace}")
        return ExitCode.OK

    return _run(opts, body)


def _run_suspend(opts: dict[str, Any], workload: str, project: str | None, value: bool) -> int:
    verb = "suspend" if value else "resume"
    refused = _refuse_if_read_only(opts, f"{verb} {workload}")
    if refused is not None:
        return refused

    async def body(cfg: ClusterConfig) -> int:
        target, _ = await _target(cfg, workload, project)
        async with KubeClient(cfg) as client:
            try:
                changed = await set_suspended(client, target, value)
            except SessionError as exc:
                raise _user_error(exc) from None
        if not changed:
            print(f"{target.ref} was already {'suspended' if value else 'running (not suspended)'}")
        elif value:
            print(f"{target.ref} suspended (its pods are being deleted; 'ranks resume {workload}' brings them back)")
        else:
            print(f"{target.ref} resumed (the operator recreates its pods)")
        return ExitCode.OK

    return _run(opts, body)


def run_suspend(opts: dict[str, Any], workload: str, project: str | None) -> int:
    return _run_suspend(opts, workload, project, True)


def run_resume(opts: dict[str, Any], workload: str, project: str | None) -> int:
    return _run_suspend(opts, workload, project, False)
