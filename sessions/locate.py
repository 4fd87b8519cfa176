"""Finding the workload a user names (NAME or KIND/NAME), as the live model groups it: in the
project given, else in the context's namespace, else in the one project the user may read that
has it. Every answer that is not the workload is a `LookupProblem` (monitors.names) with its exit
code: not found (8), forbidden (7), ambiguous (2, naming the choices)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from monitors.connection import ClusterConfig, ExitCode
from monitors.kube import KubeClient
from monitors.model_views import WorkloadView
from monitors.monitor import WORKLOAD_KINDS, Monitor
from monitors.names import LookupProblem, find_workload_namespaces, resolve_project
from monitors.sanitize import clean, shown


def pick_workload(wls: Iterable[WorkloadView], ref: str) -> WorkloadView:
    """The one workload of `wls` that `ref` names (KIND/NAME as kubectl spells it too:
    pytorchjob.kubeflow.org/mnist); none is exit 8, several exit 2 (use KIND/NAME)."""
    kind, _, name = ref.rpartition("/")
    kind = kind.split(".")[0].lower()  # pytorchjob.kubeflow.org/mnist as kubectl spells it
    found = [w for w in wls if w.name == name and (not kind or w.kind.lower() in (kind, kind + "s"))]
    if not found:
        raise LookupProblem(f"workload {shown(ref)} not found", ExitCode.NOT_FOUND)
    if len(found) > 1:
        kinds = ", ".join(f"{w.kind.lower()}/{w.name}" for w in found)
        raise LookupProblem(f"{shown(ref)} names several workloads ({clean(kinds)}); use KIND/NAME",
                            ExitCode.USAGE)
    return found[0]


async def search_namespace(cfg: ClusterConfig, ref: str, kinds: dict[tuple[str, str], Any] | None = None) -> str:
    """The one namespace, among those the user may read, with a workload named `ref` (asked
    when it is not in the context's namespace and no project was given); none is exit 8, several
    exit 2 with the projects listed. `kinds`: the served kinds, when already discovered."""
    kind, _, name = ref.rpartition("/")
    kind = kind.split(".")[0].lower()
    probe = Monitor(cfg, once=True, events=False, nodes=False)
    try:
        kinds = kinds if kinds is not None else await probe.client.served_kinds()
        wanted = [k for g, p, kname in WORKLOAD_KINDS if (k := kinds.get((g, p))) is not None
                  and (not kind or kname.lower() in (kind, kind[:-1]))]
        visible = await probe.readable_namespaces()
        namespaces = await find_workload_namespaces(probe.client, wanted, name, visible or ())
    finally:
        await probe.stop()
    if not namespaces:
        raise LookupProblem(f"workload {shown(ref)} not found in {clean(cfg.namespace)} or any other project "
                            "you may read", ExitCode.NOT_FOUND)
    if len(namespaces) > 1:
        raise LookupProblem(f"workload {shown(ref)} exists in several projects ({clean(', '.join(namespaces))}); "
                            "choose one with -p PROJECT", ExitCode.USAGE)
    return namespaces[0]


async def find_workload(cfg: ClusterConfig, namespace: str, ref: str) -> WorkloadView:
    """The workload named `ref` (NAME or KIND/NAME) in `namespace`, as the live model groups it."""
    monitor = Monitor(cfg, once=True, events=False, nodes=False, scope=(namespace,))
    try:
        await monitor.start()
        await monitor.wait_synced(timeout=120)
        try:
            return pick_workload(monitor.model.workloads.values(), ref)
        except LookupProblem as exc:
            # may not read there: say so (about pods when that is refused) rather than "not found"
            forbidden = sorted(monitor.status.forbidden.items(), key=lambda kv: (not kv[0].startswith("pods "), kv[0]))
            if exc.code == ExitCode.NOT_FOUND and forbidden:
                raise LookupProblem(f"forbidden: cannot read workloads in {namespace}: {forbidden[0][1]}",
                                    ExitCode.FORBIDDEN) from None
            if exc.code == ExitCode.NOT_FOUND:
                raise LookupProblem(f"workload {shown(ref)} not found in {clean(namespace)}",
                                    ExitCode.NOT_FOUND) from None
            raise
    finally:
        await monitor.stop()


async def locate_workload(cfg: ClusterConfig, ref: str, project: str | None) -> WorkloadView:
    """The workload `ref`: in `project` (a project or namespace name), else in the context's
    namespace, else in the one project the user may read that has it (`search_namespace`)."""
    if project:
        async with KubeClient(cfg) as probe:
            namespace = await resolve_project(probe, project, user=cfg.impersonate_user or cfg.user)
        return await find_workload(cfg, namespace, ref)
    try:
        return await find_workload(cfg, cfg.namespace, ref)
    except LookupProblem as exc:
        if exc.code not in (ExitCode.NOT_FOUND, ExitCode.FORBIDDEN):
            raise
    return await find_workload(cfg, await search_namespace(cfg, ref), ref)
