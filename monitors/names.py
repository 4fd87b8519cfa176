"""Names typed by the user (projects, workloads): checked before they reach a request, escaped
where they go into a path or a selector, and resolved only to what exists.

- `project_problem` / `workload_problem`: the rule a name breaks (None when it is fine); a
  project is a DNS-1123 label (a namespace name), a workload NAME or KIND/NAME a DNS-1123
  subdomain (KIND letters and digits, optionally `.group`).
- names go into paths and selectors through `api_paths` (one segment each, percent-escaped;
  `label_value`, re-exported: a selector value, refused when it would change the selector).
- `resolve_project`: team-a or runai-team-a -> the namespace, or `LookupProblem` (not found, exit
  8; forbidden, exit 7) without guessing a namespace that does not exist.
- `find_workload_namespaces`: where a workload of that name exists among the projects the user
  may read (for `ranks get NAME` without -p).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from . import api_paths
from .api_paths import label_value
from .connection import ExitCode
from .sanitize import clean

if TYPE_CHECKING:  # (the HTTP client only where a request is made: checking a name needs none)
    from .kube import ApiProblem, Kind, KubeClient

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
KIND = re.compile(r"[A-Za-z][A-Za-z0-9]*(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
QUEUE_LABELS = ("runai/queue", "kai.scheduler/queue")
__all__ = ["LookupProblem", "find_workload_namespaces", "label_value", "project_problem", "resolve_project",
           "who", "workload_problem"]
_USER = re.compile(r'User "([^"]{1,200})"')


class LookupProblem(Exception):
    """A name that does not resolve: a one-line message and the exit code."""

    def __init__(self, message: str, code: ExitCode) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def project_problem(name: str) -> str | None:
    """Why `name` cannot be a project or namespace name, or None."""
    if not name:
        return "a project name cannot be empty"
    if len(name) > 63:
        return f"{_show(name)} is not a project name: at most 63 characters (it has {len(name)})"
    if not DNS_LABEL.fullmatch(name):
        return (f"{_show(name)} is not a project name: use lower-case letters, digits and '-', "
                "starting and ending with a letter or digit (a namespace name, e.g. team-a)")
    return None


def workload_problem(ref: str) -> str | None:
    """Why `ref` (NAME or KIND/NAME) cannot name a workload, or None."""
    kind, slash, name = ref.rpartition("/")
    if slash and not KIND.fullmatch(kind):
        return (f"{_show(ref)} is not a workload: KIND in KIND/NAME is letters and digits "
                "(pytorchjob/mnist, mpijob/hvd)")
    if not name:
        return f"{_show(ref)} is not a workload name: it is empty"
    if len(name) > 253:
        return f"{_show(ref)} is not a workload name: at most 253 characters (it has {len(name)})"
    if not DNS_SUBDOMAIN.fullmatch(name):
        return (f"{_show(ref)} is not a workload name: use lower-case letters, digits, '-' and '.', "
                "starting and ending with a letter or digit")
    return None


def node_problem(name: str) -> str | None:
    """Why `name` cannot be a node name (a DNS subdomain), or None."""
    if not name or len(name) > 253 or not DNS_SUBDOMAIN.fullmatch(name):
        return (f"{_show(name)} is not a node name: lower-case letters, digits, '-' and '.', starting and ending "
                "with a letter or digit, at most 253 characters")
    return None


def _show(value: str) -> str:
    text = "".join(ch if ch.isprintable() else "?" for ch in value)
    return f'"{text[:80]}{"..." if len(text) > 80 else ""}"'


def who(message: str, fallback: str) -> str:
    """The identity the server names in a 403 (`User "alice" cannot ...`), else `fallback`."""
    m = _USER.search(message)
    return m.group(1) if m else fallback


# -- projects ---------------------------------------------------------------------------------------


async def _status(client: KubeClient, path: str, params: Mapping[str, Any] | None = None
                  ) -> tuple[int, Any, ApiProblem | None]:
    """(200, document, None) or (status, None, problem) for a GET; no answer raises."""
    from .kube import ApiProblem

    try:
        return 200, await client.get(path, params), None
    except ApiProblem as exc:
        return exc.status, None, exc


async def resolve_project(client: KubeClient, project: str, *, user: str = "") -> str:
    """A project name (team-a) or a namespace name (runai-team-a) -> its namespace.

    All lookups go out at once: the namespace of that name, `runai-<name>`, and namespaces
    labelled as that Run:ai / KAI queue. Where Namespace objects may not be read, the user's
    own access decides (a LIST of one pod): a namespace nobody lets us look into is reported as
    forbidden, never guessed."""
    import asyncio

    problem = project_problem(project)
    if problem:
        raise LookupProblem(problem, ExitCode.USAGE)
    names = [project] if project.startswith("runai-") else [project, f"runai-{project}"]
    gets = [_status(client, api_paths.namespace(n)) for n in names]
    labelled = [_status(client, api_paths.namespace(), {"labelSelector": api_paths.label_selector({key: project})})
                for key in QUEUE_LABELS]
    results = await asyncio.gather(*gets, *labelled)
    by_name, by_label = results[:len(names)], results[len(names):]
    for n, (status, _doc, _p) in zip(names, by_name, strict=True):
        if status == 200:
            return n
    for status, doc, _p in by_label:
        items = (doc or {}).get("items") or [] if status == 200 else []
        if items:
            return str(items[0]["metadata"]["name"])
    forbidden = [(n, p) for n, (status, _d, p) in zip(names, by_name, strict=True) if status == 403]
    others = [p for status, _d, p in results if p is not None and status not in (403, 404)]
    if others:
        raise others[0]
    if not forbidden:
        raise LookupProblem(f'project "{project}" not found', ExitCode.NOT_FOUND)
    # may not read Namespace objects: where may this user list pods?
    probes = await asyncio.gather(*(_status(client, api_paths.pod(n), {"limit": 1})
                                    for n, _p in forbidden))
    for (n, _p), (status, _doc, _pp) in zip(forbidden, probes, strict=True):
        if status == 200:
            return n
    denial = next((p for status, _d, p in probes if status == 403 and p is not None), forbidden[0][1])
    name = who(denial.message if denial is not None else "", user or "you")
    raise LookupProblem(f'forbidden: {clean(name)} may not read project "{project}"', ExitCode.FORBIDDEN)


async def find_workload_namespaces(client: KubeClient, kinds: Iterable[Kind], name: str,
                                   namespaces: Iterable[str] = ()) -> list[str]:
    """The namespaces holding an object called `name` of one of `kinds`: one LIST per kind with
    a field selector, all at once; where listing across namespaces is forbidden, a GET by name
    in each of `namespaces` (those the user may read)."""
    import asyncio

    from .kube import ApiProblem

    kinds = list(kinds)
    found: set[str] = set()
    fallback: list[Kind] = []

    async def everywhere(kind: Kind) -> None:
        try:
            doc = await client.get(kind.path(), {"fieldSelector": api_paths.field_selector({"metadata.name": name}),
                                                 "limit": 50})
        except ApiProblem as exc:
            if exc.status == 403:
                fallback.append(kind)
            elif exc.status not in (404, 405):
                raise
            return
        for item in doc.get("items") or ():
            ns = (item.get("metadata") or {}).get("namespace")
            if ns:
                found.add(str(ns))

    async def one(kind: Kind, ns: str) -> None:
        try:
            await client.get(kind.path(ns, name))
        except ApiProblem as exc:
            if exc.status not in (403, 404, 405):
                raise
            return
        found.add(ns)

    await asyncio.gather(*(everywhere(k) for k in kinds if k.namespaced))
    visible = list(dict.fromkeys(n for n in namespaces if n))
    if fallback and visible:
        await asyncio.gather(*(one(k, ns) for k in fallback for ns in visible))
    return sorted(found)
