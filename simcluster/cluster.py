"""SimCluster: the store, the API server, identities, faults and scenarios, started together.

Use it in-process as an async context manager (`async with SimCluster() as sim:`), from
synchronous code in a background thread (`with sim_in_thread() as sim:`), or as `ranks sim`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import random
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from aiohttp import web

from .apiserver.auth import MASTERS, READ_VERBS, Authz, Identity, Rule, service_account_name
from .apiserver.crds import DEFAULT_CRDS, CrdSpec
from .apiserver.errors import ApiError
from .apiserver.faults import Faults, RequestLog
from .apiserver.rbac import RbacObjects
from .apiserver.resources import Registry
from .apiserver.server import ApiServer
from .apiserver.store import ObjectStore
from .apiserver.tls import TLSMaterial, make_tls

if TYPE_CHECKING:  # the components' services, each set by its `install(sim)`
    from .controllers.base import Controller, EventRecorder
    from .gpu.dcgm import Dcgm
    from .node.devices import Devices
    from .node.exec import ExecService
    from .node.kubelet import Kubelet
    from .node.proxy import PortMap, Proxy

T = TypeVar("T")

ADMIN_USER = "admin"
# Components that make the cluster act, by name: each is a module with `install(sim)`.
COMPONENTS: dict[str, str] = {
    "operators": "simcluster.operators",
    "scheduler": "simcluster.controllers.scheduler",
    "kubelet": "simcluster.node.kubelet",
    "exec": "simcluster.node.exec",
    "proxy": "simcluster.node.proxy",
    "dcgm": "simcluster.gpu.dcgm",
}
DEFAULT_COMPONENTS: tuple[str, ...] = ("operators", "scheduler", "kubelet", "exec", "dcgm")
IMPERSONATOR = "ranks-ssh"


@dataclass(frozen=True)
class UserSpec:
    """A scenario identity: written into the kubeconfig as context `ranks-sim-<name>`."""

    name: str
    rules: tuple[Rule, ...] = ()
    groups: tuple[str, ...] = ()


class SimCluster:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = True,
        scenario: str = "empty",
        nodes: int = 0,
        gpus_per_node: int = 8,
        pods: int = 20_000,
        churn: float = 0.0,
        kubeconfig: str | Path | None = None,
        workdir: str | Path | None = None,
        history: int = 50_000,
        bookmark_interval: float = 10.0,
        crds: tuple[CrdSpec, ...] = DEFAULT_CRDS,
        seed: int = 0,
        components: tuple[str, ...] | None = None,
        pod_namespaces: bool | None = None,
    ) -> None:
        self.host = host
        # pods in their own mount and UTS namespaces where the kernel allows (None: unless
        # SIMCLUSTER_POD_NAMESPACES=0); False: the host's view, as on locked-down machines
        self.pod_namespaces = pod_namespaces
        self.port = port
        self.tls = tls
        self.scenario = scenario
        self.extra_nodes = nodes
        self.gpus_per_node = gpus_per_node
        self.scale_pods = pods
        self.churn = churn
        self.seed = seed
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="simcluster-"))
        self.kubeconfig_path = Path(kubeconfig) if kubeconfig else self.workdir / "kubeconfig"
        self.registry = Registry.with_builtins()
        self.store = ObjectStore(self.registry, history=history)
        self.authz = Authz()  # every request needs a token, with TLS or without
        self.authz.objects = RbacObjects(self.store)  # (and RoleBindings, ClusterRoleBindings as objects)
        self.faults = Faults()
        self.requests = RequestLog()
        self.server = ApiServer(
            self.store, self.authz, self.faults, self.requests,
            bookmark_interval=bookmark_interval, admin=self._admin,
        )
        self.admin_token = self.authz.add_user(ADMIN_USER, groups=(MASTERS, "system:authenticated"))
        impersonator_token = self.authz.add_user(
            IMPERSONATOR,
            groups=("system:authenticated",),
            rules=(Rule.of(["impersonate"], ["users", "groups", "serviceaccounts"], [""]),
                   # the door's one watch (docs/ssh.md): it lists and watches what it serves, and
                   # asks the API server what each user may see of it
                   Rule.of(["list", "watch"]),
                   Rule.of(["create"], ["subjectaccessreviews"], ["authorization.k8s.io"])),
        )
        # (context `ranks-sim-ranks-ssh` in every kubeconfig: the identity `ranks serve --ssh` runs as)
        self.user_tokens: dict[str, str] = {ADMIN_USER: self.admin_token, IMPERSONATOR: impersonator_token}
        self.user_namespaces: dict[str, str] = {}  # a user's context namespace in the kubeconfig
        self._crds = crds
        self._runner: web.AppRunner | None = None
        self._tls: TLSMaterial | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._stop_hooks: list[Callable[[], Any]] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self._populated = False
        if components is None:
            # the scale scenario is API objects only (no processes, no controllers) unless asked
            components = () if scenario == "scale" else DEFAULT_COMPONENTS
        self.components = tuple(components)
        self.controllers: list[Controller] = []
        self._installed = False
        # What the components offer each other, set by their `install(sim)` (None: not installed)
        self.kubelet: Kubelet | None = None  # component "kubelet": the pods' runtimes
        self.exec_service: ExecService | None = None  # component "exec": pods/exec sessions
        self.proxy: Proxy | None = None  # component "proxy" (with "dcgm"): pods/services/nodes proxy
        self.portmap: PortMap | None = None  # where pods' ports are served (`node.proxy.portmap`)
        self.dcgm: Dcgm | None = None  # component "dcgm": the GPU exporters
        self.devices: Devices | None = None  # which GPUs each container holds (`node.devices.of`)
        # core/v1 Event recorders shared by component name (`controllers.base.record_event`)
        self.event_recorders: dict[str, EventRecorder] = {}

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    async def __aenter__(self) -> SimCluster:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        if not self._populated:
            self._populate()
            self._populated = True
        if self.tls and self._tls is None:
            self._tls = make_tls((self.host, "localhost"), self.workdir / "tls")
        await self._listen()
        if not self._installed:
            self._installed = True
            import importlib

            for name in self.components:
                importlib.import_module(COMPONENTS.get(name, f"simcluster.{name}")).install(self)
        self.write_kubeconfig()
        if self.churn > 0:
            self._tasks.append(asyncio.create_task(self._churn_loop()))

    async def _listen(self) -> None:
        runner = web.AppRunner(self.server.app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await runner.setup()
        ssl_ctx = self._tls.ssl_context() if self._tls else None
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        site = web.SockSite(runner, sock, ssl_context=ssl_ctx, backlog=1024)
        await site.start()
        self._runner = runner
        self.server.address = f"{self.host}:{self.port}"

    async def _unlisten(self) -> None:
        if self._runner is not None:
            self.store.drop_watches()
            await self._runner.cleanup()
            self._runner = None

    async def restart(self, down_for: float = 0.0) -> None:
        """Stop serving and start again on the same port, keeping every object."""
        await self._unlisten()
        if down_for:
            await asyncio.sleep(down_for)
        await self._listen()

    def add_controller(self, ctrl: Controller) -> None:
        """Start a controller (see `simcluster.controllers.Controller`) on the cluster's loop."""
        self.controllers.append(ctrl)
        ctrl.start()

    async def stop(self) -> None:
        for ctrl in reversed(self.controllers):
            await ctrl.stop()
        self.controllers.clear()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        for hook in reversed(self._stop_hooks):
            result = hook()
            if asyncio.iscoroutine(result):
                await result
        self._stop_hooks.clear()
        await self._unlisten()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def on_stop(self, hook: Callable[[], Any]) -> None:
        self._stop_hooks.append(hook)

    # -- identities ----------------------------------------------------------------------------
    def add_user(
        self,
        name: str,
        *,
        rules: tuple[Rule, ...] | list[Rule] = (),
        groups: tuple[str, ...] = (),
        token: str | None = None,
    ) -> str:
        tok = self.authz.add_user(name, token=token, groups=(*groups, "system:authenticated"), rules=rules)
        self.user_tokens[name] = tok
        if self._runner is not None:
            self.write_kubeconfig()
        return tok

    def add_namespace_reader(self, name: str, namespaces: list[str], *, write: bool = False) -> str:
        """A user limited to some namespaces: may not list namespaces or nodes cluster-wide."""
        verbs = ("*",) if write else READ_VERBS
        rules = [Rule.of(verbs, namespaces=namespaces)]
        if namespaces:
            self.user_namespaces[name] = namespaces[0]
        for ns in namespaces:
            rules.append(Rule.of(("get",), ["namespaces"], [""], namespaces=[ns]))
        return self.add_user(name, rules=tuple(rules))

    def service_account_token(self, namespace: str, name: str = "default") -> str:
        """The token of a pod's service account (made on first use, with rules for its own
        namespace only: see `auth.service_account_rules`). Not written into the kubeconfig."""
        return self.authz.service_account_token(namespace, name)

    def pod_kubeconfig(self, namespace: str, service_account: str, token: str | None) -> dict[str, Any]:
        """The kubeconfig a pod gets at `~/.kube/config`: simcluster's address and CA, and the pod's
        own service-account token only (none when its token is not mounted), never another
        identity's."""
        cluster: dict[str, Any] = {"server": self.url}
        if self._tls is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self._tls.ca_pem).decode()
        user = service_account_name(namespace, service_account)
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "ranks-sim", "cluster": cluster}],
            "contexts": [{"name": "ranks-sim", "context": {"cluster": "ranks-sim", "user": user,
                                                            "namespace": namespace}}],
            "users": [{"name": user, "user": {"token": token} if token else {}}],
            "current-context": "ranks-sim",
            "preferences": {},
        }

    def kubeconfig(self, user: str = ADMIN_USER) -> dict[str, Any]:
        cluster: dict[str, Any] = {"server": self.url}
        if self._tls is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self._tls.ca_pem).decode()
        contexts = []
        users = []
        for uname, tok in self.user_tokens.items():
            ctx_name = "ranks-sim" if uname == ADMIN_USER else f"ranks-sim-{uname}"
            contexts.append(
                {"name": ctx_name, "context": {"cluster": "ranks-sim", "user": uname,
                                                "namespace": self.user_namespaces.get(uname, "default")}}
            )
            users.append({"name": uname, "user": {"token": tok}})
        current = "ranks-sim" if user == ADMIN_USER else f"ranks-sim-{user}"
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "ranks-sim", "cluster": cluster}],
            "contexts": contexts,
            "users": users,
            "current-context": current,
            "preferences": {},
        }

    def write_kubeconfig(self, path: Path | None = None, user: str = ADMIN_USER) -> Path:
        path = path or self.kubeconfig_path
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.unlink(missing_ok=True)  # (a file or link left there: never written through)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            yaml.safe_dump(self.kubeconfig(user), fh, sort_keys=False)
        os.replace(tmp, path)
        return path

    @property
    def ca_pem(self) -> bytes | None:
        return self._tls.ca_pem if self._tls else None

    # -- contents ------------------------------------------------------------------------------
    def _populate(self) -> None:
        from .scenarios import load_scenario

        for spec in self._crds:
            self.apply(spec.manifest())
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}})
        load_scenario(self, self.scenario)
        if self.extra_nodes:
            from .scenarios.nodes import gpu_nodes

            existing = self.store.count(("", "nodes"))
            for node in gpu_nodes(self.extra_nodes, self.gpus_per_node, start=existing):
                self.apply(node)

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object directly in the store (no HTTP, no auth)."""
        rt = self.registry.by_kind(obj.get("apiVersion", ""), obj.get("kind", ""))
        if rt is None:
            raise ApiError(404, f"no kind {obj.get('kind')} in {obj.get('apiVersion')}")
        meta = obj.setdefault("metadata", {})
        ns = meta.get("namespace", "") if rt.namespaced else ""
        if rt.namespaced and not ns:
            ns = meta["namespace"] = "default"
        if self.store.find(rt.key, ns, meta.get("name", "")) is not None:
            return self.store.update(rt, obj, whole=True).obj
        return self.store.create(rt, obj, ns or None, keep_uid=True).obj

    async def _churn_loop(self) -> None:
        from .scenarios.scale import churn_pod

        rng = random.Random(self.seed + 1)
        rt = self.registry.get("", "v1", "pods")
        assert rt is not None
        interval = 1.0 / self.churn
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - loop.time()))
            keys = self.store.sorted_keys(rt.key)
            if not keys:
                continue
            ns, name = keys[rng.randrange(len(keys))]
            cur = self.store.find(rt.key, ns, name)
            if cur is None:
                continue
            self.store.update(rt, churn_pod(cur.obj, rng), whole=True)

    # -- admin endpoint ------------------------------------------------------------------------
    async def _admin(self, who: Identity, action: str, p: dict[str, Any]) -> Any:
        if action == "drop-watches":
            return {"dropped": self.store.drop_watches()}
        if action == "fail":
            self.faults.fail_next(
                str(p["path"]), int(p.get("status", 500)), int(p.get("count", 1)),
                retry_after=int(p.get("retryAfter", 1)), method=p.get("method"),
            )
            return {"ok": True}
        if action == "latency":
            self.faults.latency = float(p.get("seconds", 0))
            return {"ok": True}
        if action == "stall":
            self.faults.stall_next(str(p["path"]), int(p.get("afterBytes", 0)), int(p.get("count", 1)))
            return {"ok": True}
        if action == "expire-token":
            tok = p.get("token") or self.user_tokens.get(str(p.get("user", "")))
            if not tok:
                raise ApiError(400, "expire-token needs token or user")
            self.authz.expire(str(tok))
            return {"ok": True}
        if action == "compact":
            self.store.compact()
            return {"compactedResourceVersion": str(self.store.compacted_rv)}
        if action == "clear":
            self.faults.clear()
            return {"ok": True}
        if action == "restart":
            down = float(p.get("downSeconds", 0.5))
            assert self.loop is not None
            self.loop.call_later(0.05, lambda: asyncio.ensure_future(self.restart(down)))
            return {"ok": True}
        if action == "watches":  # (the watches open now: a request is logged only once it ends)
            return {"open": self.store.watch_count}
        if action == "requests":
            since = float(p.get("since", 0))
            return {
                "requests": [
                    {"at": r.at, "method": r.method, "path": r.path, "query": r.query,
                     "verb": r.verb, "user": r.user, "status": r.status, "accept": r.accept,
                     "representation": r.representation}
                    for r in self.requests.since(since)
                ]
            }
        raise ApiError(404, f"unknown admin action {action!r}")


# -- running from synchronous code ---------------------------------------------------------------


class ThreadedSimCluster:
    """A SimCluster served from its own event loop in a background thread."""

    def __init__(self, **kwargs: Any) -> None:
        self.sim = SimCluster(**kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="simcluster", daemon=True)
        self._started = threading.Event()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def start(self) -> SimCluster:
        self._thread.start()
        self.run(self.sim.start())
        return self.sim

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 60) -> T:
        fut: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return fut.result(timeout)

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a plain function on the cluster's loop (the store is not thread-safe)."""

        async def wrapper() -> T:
            return fn(*args, **kwargs)

        return self.run(wrapper())

    def stop(self) -> None:
        try:  # (hundreds of pods end in seconds; a loaded machine can take minutes)
            self.run(self.sim.stop(), timeout=300)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(60)
            if not self._thread.is_alive():  # (a loop still running cannot be closed: left to the process's end)
                self._loop.close()


@contextlib.contextmanager
def sim_in_thread(**kwargs: Any) -> Iterator[ThreadedSimCluster]:
    t = ThreadedSimCluster(**kwargs)
    t.start()
    try:
        yield t
    finally:
        t.stop()
