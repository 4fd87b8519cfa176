"""The Kubernetes REST API over aiohttp: routing, verbs, list/watch semantics, errors."""

from __future__ import annotations

import asyncio
import bisect
import copy
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import orjson
import yaml
from aiohttp import web

from . import discovery, fieldlabels, negotiation, reviews, transform
from .auth import Authz, Identity
from .errors import ApiError, expired, status_object
from .faults import Faults, RequestLog, RequestRecord
from .messages import (
    JSON,
    MAX_BODY,
    check_body_media_type,
    cross_origin,
    decode_body,
    error_response,
    is_proxy_path,
    json_response,
    raw_response,
    send_body,
    send_list,
    send_slowly,
)
from .patch import PatchError, apply_patch, strategic_supported
from .rendezvous import PREFIX as RENDEZVOUS_PREFIX
from .rendezvous import Rendezvous
from .resources import ResourceType
from .selectors import LabelSelector, SelectorError
from .store import ObjectStore, Stored, dumps
from .validation import IPAllocator, check_body_type, default, validate_new


@dataclass
class Ctx:
    """One resource request, parsed."""

    request: web.Request
    who: Identity
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    subpath: str
    verb: str

    @property
    def query(self) -> Any:
        return self.request.query

    def negotiate(self) -> negotiation.Target | None:
        """The representation the Accept header asks for (406 if none can be served); kept on the
        request for the request log."""
        target = negotiation.negotiate(self.request.headers.get("Accept"))
        self.request[REPRESENTATION] = target.kind if target is not None else ""
        return target

    def go_type(self, list_type: bool = False) -> str:
        kind = self.rt.list_kind if list_type else self.rt.kind
        return negotiation.internal_type(self.rt.group, kind, builtin=not self.rt.from_crd)


# request key: what a GET/LIST/WATCH was answered with (a typed key where aiohttp has them)
REPRESENTATION: Any = (web.RequestKey("representation", str) if hasattr(web, "RequestKey")
                       else "simcluster.representation")
SubHandler = Callable[[Ctx], Awaitable[web.StreamResponse]]
DeleteHook = Callable[[ResourceType, dict[str, Any], int | None], bool]


def _bool(v: str | None) -> bool:
    return (v or "").lower() in ("1", "true", "yes")


class ApiServer:
    def __init__(
        self,
        store: ObjectStore,
        authz: Authz,
        faults: Faults,
        request_log: RequestLog,
        *,
        bookmark_interval: float = 10.0,
        admin: Callable[[Identity, str, dict[str, Any]], Awaitable[Any]] | None = None,
    ) -> None:
        self.store = store
        self.registry = store.registry
        self.authz = authz
        self.faults = faults
        self.log = request_log
        self.bookmark_interval = bookmark_interval
        self.address = "127.0.0.1:0"
        self.subresources: dict[str, SubHandler] = {}
        self.delete_hooks: list[DeleteHook] = []
        self.admission: list[Callable[[ResourceType, dict[str, Any]], None]] = []
        self.admin = admin
        self.service_ips = IPAllocator("10.96.0.0/12")
        self.rendezvous = Rendezvous(authz)  # the simulated torchrun's meeting point (not Kubernetes)
        # other simulation-only resources beside it, by name (the GPUs' driver, `gpus`, with DCGM)
        self.simulated: dict[str, Callable[[web.Request, Identity], Awaitable[web.StreamResponse]]] = {}
        self.app = web.Application(client_max_size=MAX_BODY)
        self.app.router.add_route("*", "/{tail:.*}", self.handle)

    # -- entry ---------------------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        start = time.time()
        verb = ""
        user = ""
        status = 500
        try:
            if self.faults.latency:
                await asyncio.sleep(self.faults.latency)
            rule = self.faults.take_failure(request.method, request.path)
            if rule is not None:
                headers = {"Retry-After": str(rule.retry_after)} if rule.status == 429 else None
                raise ApiError(rule.status, f"injected failure ({rule.status})", headers=headers)
            if (answer := await self.faults.held_or_answered(request.method, request.path)) is not None:
                status = answer.status
                return web.Response(body=answer.body, status=status, headers={"Content-Type": answer.content_type})
            resp, verb, user = await self._route(request)
            status = resp.status
            return resp
        except ApiError as err:
            status = err.code
            return error_response(err)
        except web.HTTPException as exc:
            status = exc.status
            if exc.status == 413:
                return error_response(
                    ApiError(413, f"Request entity too large: limit is {MAX_BODY}")
                )
            return error_response(ApiError(exc.status, exc.reason))
        except (ConnectionResetError, asyncio.CancelledError):
            status = 499
            raise
        except Exception as exc:  # the server must keep serving whatever a request does
            status = 500
            return error_response(ApiError(500, f"Internal error occurred: {type(exc).__name__}: {exc}"))
        finally:
            self.log.add(
                RequestRecord(start, request.method, request.path, request.query_string, verb, user, status,
                              request.headers.get("Accept", ""), request.get(REPRESENTATION, ""))
            )

    async def _route(self, request: web.Request) -> tuple[web.StreamResponse, str, str]:
        path = request.path
        if len(path) > 1 and path.endswith("/") and "/proxy/" not in path:
            path = path.rstrip("/")
        refused = cross_origin(request)
        if refused is not None:
            raise ApiError(403, refused)
        # every path needs credentials, /healthz and /version too (kube-apiserver with
        # --anonymous-auth=false)
        who = self.authz.authenticate(request.headers.get("Authorization"))
        who = self.authz.impersonate(
            who,
            request.headers.get("Impersonate-User"),
            request.headers.getall("Impersonate-Group", []),
        )
        if not is_proxy_path(path):
            check_body_media_type(request)
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok"), "", who.name
        if path == "/version":
            return json_response(discovery.SERVER_VERSION), "", who.name
        if path.startswith("/simcluster/admin/"):
            return await self._admin(request, who), "admin", who.name
        if path.startswith(RENDEZVOUS_PREFIX):
            resource = [*path[len(RENDEZVOUS_PREFIX):].split("/"), ""][1]
            if resource in self.simulated:
                return await self.simulated[resource](request, who), resource, who.name
            return await self.rendezvous.handle(request, who), "rendezvous", who.name
        resp = self._discovery(path, request.headers.get("Accept"))
        if resp is not None:
            return resp, "", who.name
        ctx = self._parse(request, who)
        if ctx.rt.group == reviews.GROUP:  # (asked, answered, never stored)
            return await self._review(ctx), ctx.verb, who.name
        if ctx.subresource and ctx.subresource != "status":
            self.authz.authorize(
                who, ctx.verb, ctx.rt.group, f"{ctx.rt.plural}/{ctx.subresource}", ctx.namespace, ctx.name
            )
            handler = self.subresources.get(f"{ctx.rt.plural}/{ctx.subresource}")
            if handler is None or ctx.subresource not in ctx.rt.subresources:
                raise ApiError(404, "the server could not find the requested resource")
            return await handler(ctx), ctx.verb, who.name
        resource = ctx.rt.plural + ("/status" if ctx.subresource == "status" else "")
        self.authz.authorize(who, ctx.verb, ctx.rt.group, resource, ctx.namespace, ctx.name)
        return await self._resource(ctx), ctx.verb, who.name

    # -- discovery -----------------------------------------------------------------------------
    def _discovery(self, path: str, accept: str | None = None) -> web.Response | None:
        reg = self.registry
        doc: dict[str, Any] | None
        if path in ("/api", "/apis") and negotiation.wants_aggregated(accept):
            doc = discovery.aggregated_discovery(reg, core=path == "/api")
            return web.Response(body=dumps(doc), headers={"Content-Type": negotiation.AGGREGATED_TYPE,
                                                          "Vary": "Accept"})
        if path == "/api":
            return json_response(discovery.api_versions(self.address))
        if path == "/apis":
            return json_response(discovery.api_group_list(reg))
        if path == "/openapi/v3":
            return json_response(discovery.openapi_root(reg))
        if path.startswith("/openapi/v3/"):
            parts = path[len("/openapi/v3/"):].strip("/").split("/")
            doc = None
            if parts[0] == "api" and len(parts) == 2:
                doc = discovery.openapi_group_version(reg, "", parts[1])
            elif parts[0] == "apis" and len(parts) == 3:
                doc = discovery.openapi_group_version(reg, parts[1], parts[2])
            if doc is None:
                raise ApiError(404, "the server could not find the requested resource")
            return json_response(doc)
        if path.startswith("/openapi/"):
            raise ApiError(404, "the server could not find the requested resource")
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) == 2:
            doc = discovery.resource_list(reg, "", parts[1])
        elif parts[0] == "apis" and len(parts) == 2:
            doc = discovery.api_group(reg, parts[1])
        elif parts[0] == "apis" and len(parts) == 3:
            doc = discovery.resource_list(reg, parts[1], parts[2])
        else:
            return None
        if doc is None:
            raise ApiError(404, "the server could not find the requested resource")
        return json_response(doc)

    def _parse(self, request: web.Request, who: Identity) -> Ctx:
        parts = [p for p in request.path.split("/") if p != ""]
        if len(parts) >= 3 and parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif len(parts) >= 4 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "the server could not find the requested resource")
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        subpath = "/".join(rest[3:])
        if sub in ("proxy",) and request.path.endswith("/") and not subpath:
            subpath = ""
        rt = self.registry.get(group, version, plural)
        if rt is None:
            raise ApiError(404, "the server could not find the requested resource")
        if namespace is not None and not rt.namespaced:
            raise ApiError(404, "the server could not find the requested resource")
        if plural == "namespaces" and name:
            namespace = name
        q = request.query
        method = request.method
        if sub and sub not in ("status", "scale", "ephemeralcontainers"):  # (those two: their method's verb)
            verb = "create" if sub in ("exec", "attach", "portforward") or method == "POST" else "get"
        elif method == "GET":
            verb = "get" if name else "watch" if _bool(q.get("watch")) else "list"
        elif method == "POST":
            if name and not sub:
                raise ApiError(405, "the server does not allow this method on the requested resource")
            verb = "create"
        elif method == "PUT":
            verb = "update"
        elif method == "PATCH":
            verb = "patch"
        elif method == "DELETE":
            verb = "delete" if name else "deletecollection"
        else:
            raise ApiError(405, "the server does not allow this method on the requested resource")
        if name is None and verb in ("update", "patch"):
            raise ApiError(405, "the server does not allow this method on the requested resource")
        return Ctx(request, who, rt, namespace, name, sub, subpath, verb)

    async def _review(self, ctx: Ctx) -> web.Response:
        """An access review (`reviews`): SubjectAccessReview and LocalSubjectAccessReview need
        `create` on them; the self reviews are every identity's."""
        plural = ctx.rt.plural
        if ctx.verb != "create" or ctx.name:
            raise ApiError(405, "the server does not allow this method on the requested resource")
        if not plural.startswith("self"):
            self.authz.authorize(ctx.who, "create", reviews.GROUP, plural, ctx.namespace)
        body = check_body_type(ctx.rt, await self._body(ctx))
        return json_response(reviews.answer(plural, body, ctx.who, ctx.namespace, self.authz), 201)

    # -- resources -----------------------------------------------------------------------------
    async def _resource(self, ctx: Ctx) -> web.StreamResponse:
        verb = ctx.verb
        if verb == "list":
            return await self._list(ctx)
        if verb == "watch":
            return await self._watch(ctx)
        if verb == "get":
            return self._get(ctx)
        if verb == "create":
            return await self._create(ctx)
        if verb == "update":
            return await self._update(ctx)
        if verb == "patch":
            return await self._patch(ctx)
        if verb == "delete":
            return await self._delete(ctx)
        if verb == "deletecollection":
            return await self._delete_collection(ctx)
        raise ApiError(405, "the server does not allow this method on the requested resource")

    def _filter(self, ctx: Ctx) -> Callable[[dict[str, Any]], bool] | None:
        """The request's label and field selectors as one predicate (None: everything);
        400 with kube's message for a malformed selector or an unsupported field label."""
        q = ctx.query
        try:
            ls = LabelSelector.parse(q.get("labelSelector"))
            fs = fieldlabels.for_type(ctx.rt.key).parse(q.get("fieldSelector"))
        except SelectorError as exc:
            raise ApiError(400, str(exc)) from None
        if ls.empty() and not fs.requirements():
            return None
        if ls.empty():
            return fs.matches
        if not fs.requirements():
            return lambda obj: ls.matches(obj.get("metadata", {}).get("labels"))

        def accept(obj: dict[str, Any]) -> bool:
            return ls.matches(obj.get("metadata", {}).get("labels")) and fs.matches(obj)

        return accept

    async def _list(self, ctx: Ctx) -> web.StreamResponse:
        rt = ctx.rt
        q = ctx.query
        target = ctx.negotiate()
        accept = self._filter(ctx)
        namespace = ctx.namespace if rt.namespaced else None
        try:
            limit = int(q.get("limit") or 0)
        except ValueError:
            raise ApiError(400, f'invalid limit "{q.get("limit")}"') from None
        token = q.get("continue")
        if token:
            rule = self.faults.take_continue_expiry(ctx.request.path)
            if rule is not None:  # compacted between the pages: the token is now too old
                if rule.before is not None:
                    rule.before()
                self.store.compact()
        list_rv = self.store.rv
        keys, start, end = self.store.key_range(rt.key, namespace)
        if accept is not None:  # (an equality label selector: the objects carrying that label alone)
            labelled = self.store.labelled(rt.key, LabelSelector.parse(q.get("labelSelector")).equalities())
            if labelled is not None:
                keys, start, end = labelled, *self.store.namespace_bounds(labelled, namespace)
        if token:
            list_rv, after = self.store.decode_continue(token)
            start = max(start, bisect.bisect_right(keys, after))
        bucket = self.store.bucket(rt.key)
        items: list[Stored] = []
        last_key: tuple[str, str] | None = None
        next_token = ""
        remaining = None
        for i in range(start, end):
            key = keys[i]
            st = bucket.get(key)
            if st is None:
                continue
            if accept is not None and not accept(st.obj):
                continue
            if limit and len(items) >= limit:
                assert last_key is not None
                next_token = self.store.encode_continue(list_rv, last_key)
                if accept is None:
                    remaining = end - i
                break
            items.append(st)
            last_key = key
        if target is not None and target.kind == negotiation.TABLE:
            include = transform.include_object(q.get("includeObject"))
            doc = transform.table(rt, [st.obj for st in items], target, include, resource_version=str(list_rv),
                                  continue_token=next_token, remaining=remaining)
            slow = self.faults.take_slow(ctx.request.path)
            if slow is not None:
                return await send_slowly(ctx.request, dumps(doc), slow.seconds)
            return await send_body(ctx.request, dumps(doc))
        if target is not None and target.kind == negotiation.PARTIAL:
            raise negotiation.is_a_list(ctx.go_type(list_type=True))
        meta = transform.list_meta(str(list_rv), next_token, remaining)
        if target is not None:  # PartialObjectMetadataList
            head = transform.list_head(negotiation.PARTIAL_LIST, target.api_version, meta)
        else:
            head = transform.list_head(rt.list_kind, rt.api_version, meta)
        slow = self.faults.take_slow(ctx.request.path)
        if slow is not None:
            body = b"".join((head, b",".join(transform.list_items(target, items)), b"]}"))
            return await send_slowly(ctx.request, body, slow.seconds)
        return await send_list(ctx.request, head, transform.list_items(target, items))

    def _get(self, ctx: Ctx) -> web.Response:
        assert ctx.name is not None
        target = ctx.negotiate()
        st = self.store.get(ctx.rt, ctx.namespace, ctx.name)
        if target is None:
            return raw_response(st.raw)
        if target.kind == negotiation.TABLE:
            include = transform.include_object(ctx.query.get("includeObject"))
            return json_response(transform.table(ctx.rt, [st.obj], target, include, resource_version=str(st.rv)))
        if target.kind == negotiation.PARTIAL_LIST:
            raise negotiation.not_a_list(ctx.go_type())
        return raw_response(transform.partial(st.obj, target))

    async def _watch(self, ctx: Ctx) -> web.StreamResponse:
        rt = ctx.rt
        q = ctx.query
        target = ctx.negotiate()
        accept = self._filter(ctx)
        if ctx.name:
            name = ctx.name
            inner = accept
            accept = lambda o: o["metadata"].get("name") == name and (inner is None or inner(o))  # noqa: E731
        namespace = ctx.namespace if rt.namespaced else None
        include = "Metadata"
        if target is not None and target.kind == negotiation.TABLE:
            include = transform.include_object(q.get("includeObject"))
        encoder = transform.WatchEncoder(rt, target, include)
        bookmarks = _bool(q.get("allowWatchBookmarks"))
        # WatchList (kubectl >= 1.32 waits this way): the current state as ADDED events, then a
        # bookmark annotated k8s.io/initial-events-end
        initial_end = _bool(q.get("sendInitialEvents"))
        try:
            timeout = float(q.get("timeoutSeconds") or 1800)
        except ValueError:
            raise ApiError(400, "invalid timeoutSeconds") from None
        resp = web.StreamResponse(status=200, headers={"Content-Type": JSON, "Cache-Control": "no-cache"})
        resp.enable_chunked_encoding()
        try:
            watcher, initial = self.store.watch(
                rt, namespace, accept, None if initial_end else q.get("resourceVersion")
            )
        except ApiError as err:
            if err.code != 410:
                raise
            await resp.prepare(ctx.request)
            await resp.write(dumps({"type": "ERROR", "object": err.status()}) + b"\n")
            await resp.write_eof()
            return resp
        stall = self.faults.take_stall(ctx.request.path)
        await resp.prepare(ctx.request)
        sent = 0  # bytes of body written (a stall rule's `after_bytes` counts them)

        async def write(data: bytes) -> bool:
            """Write `data`; False once a stall rule says the stream goes silent from here."""
            nonlocal sent
            await resp.write(data)
            sent += len(data)
            return stall is None or sent < stall.after_bytes

        deadline = time.monotonic() + timeout
        try:
            if stall is not None and stall.after_bytes <= 0:
                await self._stall(ctx.request)
                return resp
            for i in range(0, len(initial), 500):
                if not await write(b"".join(encoder.event(ev.type, ev.st) for ev in initial[i:i + 500])):
                    await self._stall(ctx.request)
                    return resp
            if initial_end:
                await write(encoder.bookmark(self.store.rv, initial_end=True))
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                wait = min(left, self.bookmark_interval) if bookmarks else left
                try:
                    ev = await asyncio.wait_for(watcher.queue.get(), wait)
                except TimeoutError:
                    if bookmarks and not watcher.closed and not await write(encoder.bookmark(self.store.rv)):
                        await self._stall(ctx.request)
                        return resp
                    continue
                if ev is None:
                    if watcher.expired:  # in band, as kube-apiserver ends a watch fallen out of its window
                        await resp.write(dumps({"type": "ERROR", "object": expired(
                            "The resourceVersion for the provided watch is too old.").status()}) + b"\n")
                        await resp.write_eof()
                    return resp  # dropped: end the stream abruptly, as a dying connection would
                batch = [ev]
                while not watcher.queue.empty() and len(batch) < 500:
                    nxt = watcher.queue.get_nowait()
                    if nxt is None:
                        watcher.queue.put_nowait(None)
                        break
                    batch.append(nxt)
                if not await write(b"".join(encoder.event(e.type, e.st) for e in batch)):
                    # silent from here, the connection open (no FIN): what a dead link looks like
                    await self._stall(ctx.request)
                    return resp
            if bookmarks:
                await resp.write(encoder.bookmark(self.store.rv))
            await resp.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            self.store.unwatch(watcher)
        return resp

    async def _stall(self, request: web.Request) -> None:
        """Hang without sending more, until the client goes away or the server stops."""
        while request.transport is not None and not request.transport.is_closing():
            await asyncio.sleep(0.2)

    async def _body(self, ctx: Ctx) -> Any:
        raw = await ctx.request.read()
        if not raw:
            raise ApiError(400, "the body of the request was empty")
        return decode_body(raw, ctx.request.headers.get("Content-Type", ""))

    def _dry_run(self, ctx: Ctx) -> bool:
        vals = ctx.request.query.getall("dryRun", [])
        for v in vals:
            if v != "All":
                raise ApiError(400, f'Invalid dryRun value "{v}": valid values are "All"')
        return bool(vals)

    def _check_namespace(self, ctx: Ctx, obj: dict[str, Any]) -> None:
        if not ctx.rt.namespaced:
            return
        meta = obj["metadata"]
        body_ns = meta.get("namespace")
        if body_ns and ctx.namespace and body_ns != ctx.namespace:
            raise ApiError(
                400,
                "the namespace of the provided object does not match the namespace sent on the request",
            )
        ns = ctx.namespace or body_ns
        if not ns:
            raise ApiError(400, "an empty namespace may not be set during creation")
        meta["namespace"] = ns
        if self.store.find(("", "namespaces"), "", ns) is None:
            raise ApiError(404, f'namespaces "{ns}" not found', details={"name": ns, "kind": "namespaces"})

    async def _create(self, ctx: Ctx) -> web.Response:
        obj = check_body_type(ctx.rt, await self._body(ctx))
        return self.create_object(ctx, obj)

    def create_object(self, ctx: Ctx, obj: dict[str, Any]) -> web.Response:
        rt = ctx.rt
        self._check_namespace(ctx, obj)
        validate_new(rt, obj)
        meta = obj["metadata"]
        if rt.key == ("", "namespaces") and meta.get("name") and ctx.namespace is None:
            pass
        default(rt, obj, self.service_ips)
        for hook in self.admission:
            hook(rt, obj)
        if self._dry_run(ctx):
            name = meta.get("name") or self.store.generate_name(meta.get("generateName", ""))
            if self.store.find(rt.key, meta.get("namespace", "") if rt.namespaced else "", name):
                from .errors import already_exists

                raise already_exists(rt.plural, rt.group, name)
            meta["name"] = name
            obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
            return json_response(obj, 201)
        st = self.store.create(rt, obj, meta.get("namespace"))
        return raw_response(st.raw, 201)

    async def _update(self, ctx: Ctx) -> web.Response:
        assert ctx.name is not None
        obj = check_body_type(ctx.rt, await self._body(ctx))
        meta = obj["metadata"]
        if meta.get("name") and meta["name"] != ctx.name:
            raise ApiError(400, "the name of the object does not match the name on the URL")
        meta["name"] = ctx.name
        if ctx.rt.namespaced:
            self._check_namespace(ctx, obj)
        return self._store_update(ctx, obj, meta.get("resourceVersion"))

    def _store_update(self, ctx: Ctx, obj: dict[str, Any], expect_rv: str | None) -> web.Response:
        sub = "status" if ctx.subresource == "status" else None
        if self._dry_run(ctx):
            self.store.get(ctx.rt, ctx.namespace, ctx.name or "")
            return json_response(obj)
        st = self.store.update(ctx.rt, obj, expect_rv=expect_rv, subresource=sub)
        return raw_response(st.raw)

    async def _patch(self, ctx: Ctx) -> web.Response:
        assert ctx.name is not None
        ctype = (ctx.request.content_type or "").lower()
        rt = ctx.rt
        if ctype == "application/strategic-merge-patch+json" and not strategic_supported(rt.group):
            raise ApiError(
                415,
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            )
        raw = await ctx.request.read()
        try:
            if ctype == "application/apply-patch+yaml":
                patch = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            else:
                patch = orjson.loads(raw)
        except (orjson.JSONDecodeError, yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
            raise ApiError(400, f"error decoding patch: {str(exc).splitlines()[0]}") from None
        cur = self.store.find(rt.key, ctx.namespace or "" if rt.namespaced else "", ctx.name)
        if cur is None:
            if ctype == "application/apply-patch+yaml":
                obj = check_body_type(rt, patch)
                obj["metadata"]["name"] = ctx.name
                return self.create_object(ctx, obj)
            self.store.get(rt, ctx.namespace, ctx.name)  # raises NotFound
            raise AssertionError
        try:
            new = apply_patch(cur.obj, patch, ctype)
        except PatchError as exc:
            code = 415 if "content type" in str(exc).lower() or "media type" in str(exc).lower() else 422
            raise ApiError(code, str(exc)) from None
        if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
            raise ApiError(422, "the patch produced an object without metadata")
        meta = new["metadata"]
        if meta.get("name") != ctx.name:
            raise ApiError(400, "metadata.name: Invalid value: the name of the object cannot change")
        expect = meta.get("resourceVersion")
        if expect == cur.obj["metadata"].get("resourceVersion"):
            expect = None
        if ctype == "application/apply-patch+yaml":
            expect = None
        return self._store_update(ctx, copy.deepcopy(new), expect)

    def _delete_options(self, ctx: Ctx, body: Any) -> tuple[str, int | None, dict[str, Any]]:
        q = ctx.query
        opts = body if isinstance(body, dict) else {}
        prop = q.get("propagationPolicy") or opts.get("propagationPolicy") or "Background"
        if prop not in ("Background", "Foreground", "Orphan"):
            raise ApiError(400, f'Unsupported value: "{prop}": supported values: "Foreground", "Background", "Orphan"')
        grace_raw = q.get("gracePeriodSeconds", opts.get("gracePeriodSeconds"))
        try:
            grace = None if grace_raw is None else int(grace_raw)
        except (TypeError, ValueError):
            raise ApiError(400, "invalid gracePeriodSeconds") from None
        return prop, grace, opts.get("preconditions") or {}

    async def _delete(self, ctx: Ctx) -> web.Response:
        assert ctx.name is not None
        raw = await ctx.request.read()
        body: Any = None
        if raw:
            body = decode_body(raw, ctx.request.headers.get("Content-Type", ""), what="DeleteOptions")
        prop, grace, pre = self._delete_options(ctx, body)
        rt = ctx.rt
        cur = self.store.get(rt, ctx.namespace, ctx.name)
        meta = cur.obj["metadata"]
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise ApiError(409, f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta.get('uid')}", reason="Conflict")
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise ApiError(409, f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, ResourceVersion in object meta: {meta.get('resourceVersion')}", reason="Conflict")
        if self._dry_run(ctx):
            return raw_response(cur.raw)
        for hook in self.delete_hooks:
            if hook(rt, cur.obj, grace):
                return raw_response(self.store.get(rt, ctx.namespace, ctx.name).raw)
        st = self.store.remove(rt, ctx.namespace, ctx.name, propagation=prop)
        if st.obj["metadata"].get("deletionTimestamp") and self.store.find(rt.key, meta.get("namespace", ""), ctx.name):
            return raw_response(st.raw)
        if rt.key == ("", "pods"):
            return raw_response(st.raw)
        return json_response(
            {
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": ctx.name, "group": rt.group, "kind": rt.plural, "uid": meta.get("uid")},
            }
        )

    async def _delete_collection(self, ctx: Ctx) -> web.Response:
        rt = ctx.rt
        accept = self._filter(ctx)
        namespace = ctx.namespace if rt.namespaced else None
        targets = [st.obj for st in self.store.items(rt.key, namespace, accept)]
        prop, grace, _ = self._delete_options(ctx, None)
        dry = self._dry_run(ctx)
        for obj in targets:
            if dry:
                continue
            m = obj["metadata"]
            if self.store.find(rt.key, m.get("namespace", ""), m["name"]) is None:
                continue
            if any(hook(rt, obj, grace) for hook in self.delete_hooks):
                continue
            self.store.remove(rt, m.get("namespace"), m["name"], propagation=prop)
        return json_response(
            {"kind": rt.list_kind, "apiVersion": rt.api_version,
             "metadata": {"resourceVersion": str(self.store.rv)}, "items": targets}
        )

    # -- admin ---------------------------------------------------------------------------------
    async def _admin(self, request: web.Request, who: Identity) -> web.Response:
        if "system:masters" not in who.groups:
            raise ApiError(403, f'User "{who.name}" may not use the simcluster admin endpoint')
        if self.admin is None:
            raise ApiError(404, "no admin endpoint")
        action = request.path[len("/simcluster/admin/"):]
        params: dict[str, Any] = {k: v[-1] for k, v in parse_qs(request.query_string).items()}
        if request.can_read_body:
            raw = await request.read()
            if raw:
                try:
                    body = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    raise ApiError(400, "admin body must be JSON") from None
                if isinstance(body, dict):
                    params.update(body)
        result = await self.admin(who, action, params)
        return json_response(result)

    def status(self, code: int, message: str) -> web.Response:
        return json_response(status_object(code, message), code)
