"""The Monitor: connection + discovery + informers + model, with coalesced diffs to subscribers.

    monitor = Monitor(cfg, namespaces=...)
    await monitor.start()          # discovery, access check, informers (LIST then WATCH)
    await monitor.wait_synced()
    monitor.subscribe(callback)    # callback(ModelDiff), at most once per coalescing window
    await monitor.stop()

`once=True` lists without watching (the CLI's one-shot commands).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import gc
from collections.abc import Callable, Coroutine, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from . import api_paths
from .connection import DEFAULT_REQUEST_TIMEOUT, ClusterConfig, ConnectionProblem
from .held_pods import HeldPods
from .informer import Change, Informer, InformerState
from .kube import ApiProblem, BadAnswer, Kind, KubeClient, parse_object
from .model import LiveModel
from .model_views import ModelDiff
from .parse import BadObject, parse_event, parse_job, parse_namespace, parse_node, parse_pod, parse_quota
from .pod_rows import TABLE_ROWS
from .records import PodRec
from .row_informer import PodRowsInformer
from .shared_view import SharedInformer, SharedView

R = TypeVar("R")
K = TypeVar("K", bound=Hashable)

# (group, plural, kind) of the workload kinds watched when the server offers them
WORKLOAD_KINDS: tuple[tuple[str, str, str], ...] = (
    ("kubeflow.org", "pytorchjobs", "PyTorchJob"),
    ("kubeflow.org", "tfjobs", "TFJob"),
    ("kubeflow.org", "xgboostjobs", "XGBoostJob"),
    ("kubeflow.org", "jaxjobs", "JAXJob"),
    ("kubeflow.org", "paddlejobs", "PaddleJob"),
    ("kubeflow.org", "mpijobs", "MPIJob"),
    ("trainer.kubeflow.org", "trainjobs", "TrainJob"),
    ("jobset.x-k8s.io", "jobsets", "JobSet"),
    ("run.ai", "distributedworkloads", "DistributedWorkload"),
    ("batch", "jobs", "Job"),
)


UNCLAIMED_READ = 512  # running pods outside any workload read whole at start (their GPUs)
NODE_PODS_READ = 64  # nodes whose pods a one-project command reads, at most (for their free GPUs)
PENDING_FIRST = 200  # pending workloads whose scheduler message the dashboard's first picture waits for
ONE_ROW = {"limit": 1, "includeObject": "None"}  # "may I list pods here?", asked as cheaply as possible


@dataclass
class MonitorStatus:
    cluster_wide: bool = True
    namespaces: tuple[str, ...] = ()
    forbidden: dict[str, str] = field(default_factory=dict)  # informer name -> message
    retrying: dict[str, str] = field(default_factory=dict)
    served: tuple[str, ...] = ()

    @property
    def connected(self) -> bool:
        return not self.retrying


class Monitor:
    def __init__(
        self,
        cfg: ClusterConfig,
        *,
        namespaces: Iterable[str] = (),
        once: bool = False,
        coalesce: float = 0.05,
        events: bool = True,
        nodes: bool = True,
        read_timeout: float = 75.0,
        backoff: tuple[float, float] = (0.5, 30.0),
        client: KubeClient | None = None,
        scope: tuple[str, ...] | None = None,
        pod_rows: bool = False,
        unsettled: bool = True,
        shared: SharedView | None = None,
        pods_to: Callable[[LiveModel], Callable[[Iterable[tuple[tuple[str, str], PodRec | None]]], None]] | None = None,
        collect_listed: bool = True,
    ) -> None:
        """`pod_rows`: list pods as the rows `kubectl get pods` prints (`row_informer`), for views
        that show workloads, projects and nodes but no pod's spec; the watch stays full objects.
        `unsettled` (with `pod_rows`): then the full objects of the failed and the restarted pods
        (exit codes); watching, each pending workload's scheduler message is read before the first
        picture (`explain_pending`, which one-shot commands call when they show it). `shared`:
        the SSH door's one watch (`shared_view`): every kind from there, as this user may see it,
        no LIST or WATCH of this monitor's own. `pods_to`: given the model, where the pods' changes go
        instead of it (`ranks gpus`, which needs of each pod only its owner: `gpu_owners`).
        `collect_listed`: after the first picture, collect what the LISTs left here and resume the
        cyclic collector, off since `start` (False: the caller does both, once, as the dashboard's
        `tui.app.settle_heap`; resumed at the latest by `stop`)."""
        self.cfg = cfg
        self.shared = shared
        self.client = client or KubeClient(cfg)
        self.model = LiveModel()
        self.model.one_shot = once
        self.once = once
        self.coalesce = coalesce
        self.want_events = events
        self.want_nodes = nodes
        self.pods_to = pods_to
        self.collect_listed = collect_listed
        self.read_timeout = read_timeout
        self.backoff = backoff
        self.extra_namespaces = tuple(dict.fromkeys(n for n in namespaces if n))
        self.scope = scope  # watch only these namespaces, even when cluster-wide is allowed
        self.pod_rows = pod_rows
        self.unsettled = unsettled
        self.pending_left = False  # pending workloads whose scheduler message is read later
        self.metrics_note = ""  # which GPU metrics source is in use, for display
        self.metrics_problem = ""
        self.metrics_forbidden = ""  # GPU metrics are forbidden to this identity: why
        self.status = MonitorStatus()
        self.informers: list[Informer[Any, Any]] = []
        self.kinds: dict[tuple[str, str], Kind] = {}
        self._subscribers: list[Callable[[ModelDiff], None]] = []
        self._flush_handle: asyncio.TimerHandle | None = None
        self._early: dict[str, asyncio.Task[Any]] = {}  # requests started before start() needs them
        self._gc_paused = False
        self._listed: list[tuple[int, Callable[[], None]]] = []  # once: each LIST's changes (their order), to apply
        self._held: HeldPods | None = None  # watching Table rows: the pods wait for the workloads' first LISTs

    # -- lifecycle -----------------------------------------------------------------------------
    def prefetch(self) -> None:
        """Send the first requests now (discovery; without a scope, the cluster-wide access check
        and the namespace list), so that what a caller does before `start()` (resolving a
        project) costs no extra round trip. `start()` calls it too."""
        loop = asyncio.get_running_loop()
        if self.shared is not None:
            return

        def early(name: str, coro: Coroutine[Any, Any, Any]) -> None:
            if name in self._early:
                coro.close()
            else:
                self._early[name] = loop.create_task(coro, name=f"monitor {name}")

        early("kinds", self.client.served_kinds())
        if self.scope is None:
            early("wide", self._can_list_cluster_wide())
            early("namespaces", self._namespace_list())

    async def start(self) -> None:
        """Discovery, the access check and the namespaces to watch, all at once (one round trip,
        two for a user who may not list cluster-wide), then every informer's first LIST."""
        if gc.isenabled():  # the first LISTs build only acyclic records: no cyclic GC until they
            gc.disable()    # are in (`wait_synced`)
            self._gc_paused = True
        if self.shared is not None:
            return await self._start_shared(self.shared)
        self.prefetch()
        try:
            if self.scope is None:
                self.kinds, cluster_wide = await asyncio.gather(self._early["kinds"], self._early["wide"])
            else:  # the scope's Namespace objects are read along with the LISTs
                if "scope" not in self._early:
                    self._early["scope"] = asyncio.get_running_loop().create_task(
                        self._read_namespaces(list(self.scope)))
                self.kinds = await self._early["kinds"]
                cluster_wide = False
        except BaseException:
            self._cancel_early()
            raise
        self.status.served = tuple(sorted(f"{p}.{g}" if g else p for g, p in self.kinds))
        self.status.cluster_wide = cluster_wide
        scopes: list[str | None]
        if cluster_wide:
            self._cancel_early(keep=("namespaces",) if self.pod_rows else ())
            scopes = [None]
        else:
            scopes = list(self.scope) if self.scope is not None else list(await self._visible_namespaces())
            self.status.namespaces = tuple(s for s in scopes if s)

        def core(plural: str) -> Kind | None:
            return self.kinds.get(("", plural))

        if cluster_wide:
            self._add(core("namespaces"), None, parse_namespace, lambda r: r.name, self.model.apply_namespaces)
        if self.want_nodes:
            self._add(core("nodes"), None, parse_node, lambda r: r.name, self.model.apply_nodes)
        for ns in scopes:
            apply_pods = self.pods_to(self.model) if self.pods_to is not None else self.model.apply_pods
            if self.pod_rows:
                self._add(core("pods"), ns, parse_pod, lambda r: r.key, apply_pods,
                          factory=functools.partial(PodRowsInformer, namespaces=self._namespace_names,
                                                    unsettled=self.unsettled))
            else:
                self._add(core("pods"), ns, parse_pod, lambda r: r.key, apply_pods)
            self._add(core("resourcequotas"), ns, parse_quota, lambda r: (r.namespace, r.name),
                      self.model.apply_quotas)
            if self.want_events:
                self._add(core("events"), ns, parse_event, lambda r: (r.namespace, r.name), self.model.apply_events)
            for group, plural, kind_name in WORKLOAD_KINDS:
                kind = self.kinds.get((group, plural))
                if kind is not None:
                    self._add(kind, ns, parse_job(kind_name, group, kind.version), lambda r: r.key,
                              self.model.apply_jobs)
        if self.pod_rows and not self.once and self.pods_to is None:
            workload_kinds = {(g, p) for g, p, _ in WORKLOAD_KINDS}
            self._held = HeldPods(i for i in self.informers if (i.kind.group, i.kind.plural) in workload_kinds)
        for inf in self.informers:
            inf.start()
        if "scope" in self._early:
            await self._early["scope"]

    async def _start_shared(self, view: SharedView) -> None:
        """Every kind from the door's view: one informer per kind the door serves, cluster-wide (the
        view holds only what this user may see)."""
        view.start()
        await view.hello.wait()
        await view.synced.wait()  # (the access below is known with the first picture)
        self.kinds = dict(view.kinds)
        self.status.served = tuple(sorted(f"{p}.{g}" if g else p for g, p in self.kinds))
        self._access_changed(first=True)
        view.access_listeners.append(self._access_changed)
        shared = functools.partial(SharedInformer, view=view)

        def core(plural: str) -> Kind | None:
            return self.kinds.get(("", plural))

        # (applied in this order: the workloads before their pods, no pod grouped twice)
        for group, plural, kind_name in WORKLOAD_KINDS:
            kind = self.kinds.get((group, plural))
            if kind is not None:
                self._add(kind, None, parse_job(kind_name, group, kind.version), lambda r: r.key,
                          self.model.apply_jobs, factory=shared)
        self._add(core("namespaces"), None, parse_namespace, lambda r: r.name, self.model.apply_namespaces,
                  factory=shared)
        if self.want_nodes:
            self._add(core("nodes"), None, parse_node, lambda r: r.name, self.model.apply_nodes, factory=shared)
        self._add(core("pods"), None, parse_pod, lambda r: r.key, self.model.apply_pods, factory=shared)
        self._add(core("resourcequotas"), None, parse_quota, lambda r: (r.namespace, r.name), self.model.apply_quotas,
                  factory=shared)
        if self.want_events:
            self._add(core("events"), None, parse_event, lambda r: (r.namespace, r.name), self.model.apply_events,
                      factory=shared)
        for inf in self.informers:
            inf.start()

    def _access_changed(self, first: bool = False) -> None:
        """The user's access as the door's view says it (everywhere, or these namespaces)."""
        view = self.shared
        if view is None:
            return
        self.status.cluster_wide = view.cluster_wide
        self.status.namespaces = () if view.cluster_wide else view.namespaces
        if not first:
            self.model.status_changed = True
            self._schedule_flush()

    def _add(self, kind: Kind | None, ns: str | None, parse: Callable[[dict[str, Any]], R],
             key: Callable[[R], K], apply: Callable[[Iterable[tuple[K, R | None]]], None],
             factory: Callable[..., Informer[R, K]] = Informer) -> None:
        if kind is None:
            return

        def sink(inf: Informer[R, K], changes: list[Change[R, K]]) -> None:
            batch = [(c.key, c.new) for c in changes]
            if self.once:  # applied together once every LIST is in, workloads before their pods
                self._listed.append((self._apply_order(apply), functools.partial(apply, batch)))
                return
            run = apply
            if isinstance(inf, PodRowsInformer) and self.pods_to is None:  # (one record a row: the model's)
                run = functools.partial(inf.applied, apply, self.model.pods)
            held = self._held
            if held is not None and inf.kind.plural == "pods" and not inf.kind.group and held.hold(run, batch):
                return
            run(batch)
            if held is not None:
                held.release()  # (after a workload kind's first LIST: the pods held till then)
            self._schedule_flush()

        inf = factory(
            self.client, kind, parse, key, sink, namespace=ns, watch=not self.once,
            read_timeout=self.read_timeout, backoff_min=self.backoff[0], backoff_max=self.backoff[1],
            on_state=self._on_state, give_up_after=self.cfg.request_timeout or DEFAULT_REQUEST_TIMEOUT,
        )
        self.informers.append(inf)

    async def _can_list_cluster_wide(self) -> bool:
        try:
            await self.client.request("GET", "/api/v1/pods", params=ONE_ROW, accept=TABLE_ROWS)
            return True
        except ApiProblem as exc:
            if exc.status == 403:
                return False
            raise

    def _cancel_early(self, keep: tuple[str, ...] = ()) -> None:
        for name, task in self._early.items():
            if name in keep:
                continue
            task.cancel()
            task.add_done_callback(_retrieve)  # a speculative request that failed is not an error

    async def _namespace_list(self) -> list[dict[str, Any]] | None:
        """Every Namespace object, or None when that is forbidden. An impersonated user (the SSH
        door) who may not list them gets the names the credentials' own identity may list, if
        any: candidates only, each then checked as the user (`_visible_namespaces`)."""
        try:
            doc = await self.client.get("/api/v1/namespaces")
        except ApiProblem:
            if not self.cfg.impersonate_user:
                return None
            try:
                doc = parse_object(await self.client.request("GET", "/api/v1/namespaces", as_self=True),
                                   "GET /api/v1/namespaces")
            except (ApiProblem, BadAnswer):
                return None
        items = doc.get("items")
        return [i for i in items if isinstance(i, dict) and isinstance(i.get("metadata"), dict)
                and isinstance(i["metadata"].get("name"), str)] if isinstance(items, list) else []

    async def _namespace_names(self) -> list[str] | None:
        """The names of every namespace (the pods informer's LIST, namespace by namespace); the
        first time from the request sent at start."""
        early = self._early.pop("namespaces", None)
        items = await early if early is not None and not early.cancelled() else await self._namespace_list()
        return None if items is None else [str(i["metadata"]["name"]) for i in items]

    async def _visible_namespaces(self) -> list[str]:
        """Namespaces to watch when the user may not list cluster-wide: ours (the context's and the
        configured ones) and the Run:ai ones, where a LIST of one pod is allowed."""
        names = list(self.extra_namespaces)
        if self.cfg.namespace and self.cfg.namespace not in names:
            names.append(self.cfg.namespace)
        items = await self._early["namespaces"] if "namespaces" in self._early else await self._namespace_list()
        for item in items or ():
            n = item["metadata"]["name"]
            labels = item["metadata"].get("labels") or {}
            if (n.startswith("runai-") or "runai/queue" in labels or "kai.scheduler/queue" in labels) \
                    and n not in names:
                names.append(n)

        async def readable(n: str) -> bool:
            try:
                await self.client.request("GET", api_paths.pod(n), params=ONE_ROW, accept=TABLE_ROWS)
            except ApiProblem as exc:
                if exc.status in (403, 404):
                    return False  # cannot read inside it: not one of ours
                raise
            return True

        checks, _ = await asyncio.gather(asyncio.gather(*(readable(n) for n in names)), self._read_namespaces(names))
        visible = [n for n, ok in zip(names, checks, strict=True) if ok]
        self.model.apply_namespaces([(n, None) for n in names if n not in visible and n in self.model.namespaces])
        return visible

    async def readable_namespaces(self) -> list[str] | None:
        """None when the user may list across namespaces, else the namespaces they may read."""
        if await self._can_list_cluster_wide():
            return None
        return await self._visible_namespaces()

    async def _read_namespaces(self, names: list[str]) -> None:
        async def one(n: str) -> None:
            try:
                raw = await self.client.get(api_paths.namespace(n))
            except ApiProblem as exc:
                if exc.status not in (403, 404):
                    raise
                return
            try:
                rec = parse_namespace(raw)
            except BadObject:  # (not a namespace: as if it could not be read)
                return
            self.model.apply_namespaces([(n, rec)])

        await asyncio.gather(*(one(n) for n in names))

    def _on_state(self, inf: Informer[Any, Any]) -> None:
        name = inf.name
        changed = False
        if inf.state == InformerState.FORBIDDEN:
            changed = self.status.forbidden.get(name) != inf.error
            self.status.forbidden[name] = inf.error
        else:
            changed = self.status.forbidden.pop(name, None) is not None
        if inf.state in (InformerState.RETRYING, InformerState.UNAUTHORIZED):
            why = (ApiProblem(401, "Unauthorized", inf.error).one_line() if inf.state == InformerState.UNAUTHORIZED
                   else inf.error or inf.state.value)  # expired credentials say so, not "Unauthorized"
            changed = changed or self.status.retrying.get(name) != why
            self.status.retrying[name] = why
        else:
            changed = changed or self.status.retrying.pop(name, None) is not None
        if self._held is not None and self._held.release():  # a workload kind that will not list soon
            self._schedule_flush()
        if changed:
            self.model.status_changed = True
            self._schedule_flush()

    async def wait_synced(self, timeout: float | None = None) -> None:
        """Until every informer has its first LIST (or knows it is forbidden); raises what kills one."""
        waits = {asyncio.ensure_future(i.synced.wait()) for i in self.informers}
        tasks = {i.task for i in self.informers if i.task is not None}
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        listed = False
        try:
            while waits:
                left = None if deadline is None else max(0.0, deadline - loop.time())
                done, _ = await asyncio.wait(waits | tasks, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    raise TimeoutError("timed out waiting for the first LIST of every kind")
                for t in done & tasks:
                    tasks.discard(t)
                    failure = None if t.cancelled() else t.exception()
                    if failure is not None:
                        raise failure
                waits -= done
            listed = True
        finally:
            for w in waits:
                w.cancel()
            if not self.once and not listed:
                self._resume_gc()
        if self._held is not None:
            self._held.release(force=True)
        self._apply_listed()
        self.flush()
        if not self.once and self.collect_listed:  # (after the first flush: its views, 100,000 ranks
            self._resume_gc()  # at 100,000 pods, are built without the collector rescanning the heap)
        if self.pod_rows and not self.once:  # the first picture says why each pending job waits
            # (and what GPUs the others hold; a failure here leaves the rows as they are: the
            # informers notice a lost connection themselves)
            # (on a crowded cluster, thousands of pending jobs: the first PENDING_FIRST now, the rest
            # once the picture is up, `explain_rest`)
            explained, _ = await asyncio.gather(self.explain_pending(most=PENDING_FIRST), self.read_unclaimed(),
                                                return_exceptions=True)
            self.pending_left = explained is True
        if self.once:  # what was listed lives until the command exits: never scan it again
            self._resume_gc()
            gc.freeze()
        else:  # (not frozen: a long-lived process would keep cyclic garbage of the moment forever)
            # (from the SSH door's view nothing was parsed: no garbage to collect here; the
            # dashboard's first picture collects once, `tui.app.settle_heap`)
            release_memory(collect=self.shared is None and self.collect_listed)

    def _resume_gc(self) -> None:
        if self._gc_paused:
            gc.enable()
            self._gc_paused = False

    async def explain_rest(self) -> None:
        """The scheduler messages the first picture left out (`wait_synced`), read after it."""
        if self.pending_left:
            self.pending_left = False
            with contextlib.suppress(ApiProblem, ConnectionProblem, OSError):
                await self.explain_pending()

    async def read_unclaimed(self, most: int = UNCLAIMED_READ, limit: int = 32) -> None:
        """Running pods that are Table rows no workload claimed (a Deployment's inference server, a
        bare pod): read whole, for the GPUs they hold (nodes, projects; a GPU pod with an owner is a
        workload of its own). At most `most` of them, `limit` at a time."""
        pods_kind = self.kinds.get(("", "pods"))
        model = self.model
        wanted = [pk for pk, p in model.pods.items()
                  if p.partial and p.node and not p.terminated and pk not in model.pod_workload][:most]
        if pods_kind is None or not wanted:
            return
        gate = asyncio.Semaphore(limit)

        async def one(key: tuple[str, str]) -> PodRec | None:
            async with gate:
                return await self._read_pod(pods_kind, key)

        self._adopt([rec for rec in await asyncio.gather(*(one(k) for k in wanted)) if rec is not None])
        self.flush()

    async def explain_pending(self, limit: int = 32, most: int | None = None) -> bool:
        """Each pending workload's scheduler message, where its pods are Table rows (which carry
        none): one pod per workload is read whole (`limit` at a time), as `derive_status` needs only
        the first unscheduled pod's message. `most`: only the first so many workloads (by
        namespace and name); True when some were left for a later call."""
        pods_kind = self.kinds.get(("", "pods"))
        wanted = []
        for w in sorted(self.model.workloads.values(), key=lambda w: (w.namespace, w.name)):
            if w.status != "Pending":
                continue
            first = next((r for r in w.ranks if r.phase == "Pending" and not r.node), None)
            rec = self.model.pods.get((w.namespace, first.pod)) if first is not None else None
            if rec is not None and rec.partial:
                wanted.append(rec.key)
        if pods_kind is None or not wanted:
            return False
        left = most is not None and len(wanted) > most
        if left:
            wanted = wanted[:most]
        gate = asyncio.Semaphore(limit)

        async def one(key: tuple[str, str]) -> tuple[tuple[str, str], PodRec | None]:
            async with gate:  # gone (404) or not ours to read: the row stays
                return key, await self._read_pod(pods_kind, key)

        self._adopt([rec for _, rec in await asyncio.gather(*(one(k) for k in wanted)) if rec is not None])
        self.flush()
        return left

    async def load_full_pods(self, key: tuple[str, str, str]) -> None:
        """The full objects of one workload's pods, where they are Table rows (the workload shown
        in detail: commands, exits, scheduler messages, tolerations). One label-selected LIST by
        the label its operator sets, else each pod read. Later changes come whole with the watch."""
        pods_kind = self.kinds.get(("", "pods"))
        wl = self.model.workloads.get(key)
        if pods_kind is None or wl is None or not self.pod_rows:
            return
        partial = [(wl.namespace, r.pod) for r in wl.ranks
                   if (p := self.model.pods.get((wl.namespace, r.pod))) is not None and p.partial]
        if not partial:
            return
        selector = workload_selector(wl.kind, wl.name)
        try:
            if selector:
                raw = await self.client.request("GET", pods_kind.path(wl.namespace),
                                                params={"labelSelector": selector})
                recs = parse_pods(raw)
            else:
                recs = [r for r in await asyncio.gather(*(self._read_pod(pods_kind, k) for k in partial[:256]))
                        if r is not None]
        except (ApiProblem, ConnectionProblem):
            return  # the rows stay; the watch brings each pod whole when it changes
        self._adopt(recs)
        self._schedule_flush()

    async def load_node_pods(self, node: str) -> None:
        """The full objects of the pods on `node`, where they are Table rows (the node's pods
        shown: their creation times, commands): one field-selected LIST per pods informer (over the
        SSH door, per namespace the user may read, unless they may read every one)."""
        if not self.pod_rows:
            return
        recs: list[PodRec] = []
        pods = [i for i in self.informers if i.kind.plural == "pods" and not i.kind.group]
        scopes: list[str | None] = [i.namespace for i in pods]
        if self.shared is not None and not self.shared.cluster_wide:
            scopes = list(self.shared.namespaces)
        for ns in scopes if pods else ():
            try:
                raw = await self.client.request("GET", pods[0].kind.path(ns),
                                                params={"fieldSelector": api_paths.field_selector({"spec.nodeName": node})})
            except (ApiProblem, ConnectionProblem):
                continue  # the rows stay
            recs += parse_pods(raw)
        self._adopt(recs)
        self._schedule_flush()

    async def count_node_pods(self, nodes: Iterable[str], limit: int = 16, most: int = NODE_PODS_READ) -> bool:
        """Every project's pods on `nodes` that hold their resources (not Succeeded or Failed), as
        `kubectl describe node` finds them: one field-selected LIST per node, cluster-wide, `limit`
        at a time, so that a one-project command counts the GPUs other projects use there. Pods the
        model does not hold join it (only their node's GPU count uses them). True when every node's
        pods were read; False when one may not be (forbidden, failing) or there are over `most`."""
        names = sorted(set(nodes))
        pods_kind = self.kinds.get(("", "pods"))
        if pods_kind is None or len(names) > most:
            return False
        gate = asyncio.Semaphore(limit)
        selector = "status.phase!=Succeeded,status.phase!=Failed"

        async def one(node: str) -> list[PodRec] | None:
            params = {"fieldSelector": f"{api_paths.field_selector({'spec.nodeName': node})},{selector}"}
            async with gate:
                try:
                    return parse_pods(await self.client.request("GET", pods_kind.path(None), params=params))
                except (ApiProblem, ConnectionProblem, BadAnswer):
                    return None

        found = await asyncio.gather(*(one(n) for n in names))
        self.model.apply_pods([(r.key, r) for recs in found if recs for r in recs if r.key not in self.model.pods])
        self.flush()
        return all(recs is not None for recs in found)

    def _adopt(self, recs: list[PodRec]) -> None:
        """Full objects read for pods the model holds as rows: in the pods informer's cache (so a
        later event or relist compares with them) and in the model."""
        known = [r for r in recs if (p := self.model.pods.get(r.key)) is not None and p.partial]
        for r in known:
            inf = next((i for i in self.informers if i.kind.plural == "pods" and not i.kind.group
                        and i.namespace in (None, r.namespace)), None)
            if inf is not None:
                inf.cache[r.key] = r
        self.model.apply_pods([(r.key, r) for r in known])

    async def _read_pod(self, kind: Kind, key: tuple[str, str]) -> PodRec | None:
        try:
            raw = await self.client.request("GET", kind.path(key[0], key[1]))
        except ApiProblem:
            return None
        try:
            return parse_pod(orjson.loads(raw))
        except Exception:  # a malformed object: the row stays
            return None

    def _apply_listed(self) -> None:
        """A one-shot command's LISTs into the model in the order that builds each view once:
        namespaces, quotas and nodes, then the workloads, then their pods (no pod is grouped
        before its workload is known, no workload rebuilt for each of its pods' arrival)."""
        listed, self._listed = self._listed, []
        for _, apply in sorted(listed, key=lambda x: x[0]):
            apply()

    def _apply_order(self, apply: object) -> int:
        """Where a kind's changes go in `_apply_listed`'s order (a model's `apply_*` method)."""
        m = self.model
        order: list[object] = [m.apply_namespaces, m.apply_quotas, m.apply_nodes, m.apply_jobs, m.apply_pods]
        return order.index(apply) if apply in order else len(order)

    def pods_forbidden(self) -> dict[str, str]:
        """namespace -> the server's message, where listing pods was forbidden."""
        return {i.namespace or "": i.error for i in self.informers
                if i.kind.plural == "pods" and not i.kind.group and i.state == InformerState.FORBIDDEN}

    async def stop(self) -> None:
        if self.shared is not None and self._access_changed in self.shared.access_listeners:
            self.shared.access_listeners.remove(self._access_changed)
        self._resume_gc()
        self._cancel_early()
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        await asyncio.gather(*(i.stop() for i in self.informers), return_exceptions=True)
        await self.client.close()

    # -- diffs ---------------------------------------------------------------------------------
    def subscribe(self, fn: Callable[[ModelDiff], None]) -> None:
        self._subscribers.append(fn)

    def _schedule_flush(self) -> None:
        if self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_later(self.coalesce, self.flush)

    def flush(self) -> ModelDiff:
        self._flush_handle = None
        d = self.model.flush()
        if d:
            for fn in list(self._subscribers):
                fn(d)
        return d

    @property
    def list_requests(self) -> int:
        return sum(i.lists for i in self.informers)


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


def parse_pods(raw: bytes) -> list[PodRec]:
    """The pods of a PodList's body; a malformed one is left out (its row stays)."""
    out: list[PodRec] = []
    try:
        items = orjson.loads(raw).get("items") or ()
    except (orjson.JSONDecodeError, AttributeError):
        return out
    for item in items if isinstance(items, list) else ():
        try:
            out.append(parse_pod(item))
        except Exception:
            continue
    return out


def workload_selector(kind: str, name: str) -> str:
    """The label selector of a workload's pods, as its operator labels them ("" when unknown, or
    when its name can be no label value: then no pod carries it either)."""
    key = next((k for kinds, k in POD_LABELS if kind in kinds), None)
    if key is None:
        return ""
    try:
        return api_paths.label_selector({key: name})
    except api_paths.BadSegment:
        return ""


# the label each operator gives a workload's pods, naming it
POD_LABELS = ((("PyTorchJob", "TFJob", "XGBoostJob", "JAXJob", "PaddleJob", "MPIJob", "DistributedWorkload"),
               "training.kubeflow.org/job-name"),
              (("JobSet", "TrainJob"), "jobset.sigs.k8s.io/jobset-name"),
              (("Job",), "job-name"))


def release_memory(collect: bool = True) -> None:
    """After the first LIST, the parsed pages are garbage: collect them (`collect`) and hand the
    freed heap back to the OS (glibc keeps it otherwise), so RSS reflects the model, not the
    initial burst."""
    if collect:
        gc.collect()
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


__all__ = ["ConnectionProblem", "Monitor", "MonitorStatus"]
