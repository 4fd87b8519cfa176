"""What each user of the SSH door may read, as the API server decides it: a SubjectAccessReview
(`authorization.k8s.io/v1`) per user and groups, verb `list`, resource and namespace, asked with
the door's own identity (it needs `create subjectaccessreviews`), never ranks' own rules.

Answers are kept per (user, groups) and asked again every `RECHECK` seconds (under the 60 s a
revoked user may go on seeing a namespace) and at once when the cluster's RBAC objects change
(`recheck_all`, the door's watch of roles and bindings). The groups asked for are the identity's
and `system:authenticated`, as the API server adds it to an impersonated user. A review that
cannot be asked (no answer, an error) counts as a refusal until it can: nothing is shown on a
guess; a review asked again that cannot be asked keeps the answer it had."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

import orjson

from monitors.connection import ConnectionProblem
from monitors.kube import ApiProblem, BadAnswer, KubeClient

SAR_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
RECHECK = 45.0  # seconds between two reviews of the same question
RETRY = 5.0  # seconds before a review that could not be asked is asked again
CONCURRENT = 16  # reviews asked at once
AUTHENTICATED = "system:authenticated"

Who = tuple[str, tuple[str, ...]]  # (user, groups)
Question = tuple[str, str, str]  # (group, resource, namespace: "" for cluster-wide)


def who_of(user: str, groups: Iterable[str]) -> Who:
    """The identity a review asks about: the user, its groups and `system:authenticated`."""
    return user, tuple(sorted({*groups, AUTHENTICATED}))


def review_body(who: Who, question: Question, verb: str = "list") -> dict[str, Any]:
    group, resource, namespace = question
    attrs: dict[str, str] = {"verb": verb, "group": group, "resource": resource}
    if namespace:
        attrs["namespace"] = namespace
    if resource == "namespaces" and namespace:  # (a Namespace of its own: may the user read it)
        attrs.update(verb="get", name=namespace)
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": who[0], "groups": list(who[1]), "resourceAttributes": attrs}}


class AccessReviews:
    """The API server's answers, kept: `allowed(who, question)` (asked once at a time per
    question), `known(who, question)` without asking, `recheck_all()` for every kept answer."""

    def __init__(self, client: KubeClient, recheck: float = RECHECK) -> None:
        self.client = client
        self.recheck = recheck
        self.answers: dict[Who, dict[Question, tuple[bool, float]]] = {}
        self.asked = 0  # reviews sent (figures, tests)
        self._inflight: dict[tuple[Who, Question], asyncio.Future[bool]] = {}
        self._gate = asyncio.Semaphore(CONCURRENT)

    def known(self, who: Who, question: Question) -> bool | None:
        got = self.answers.get(who, {}).get(question)
        return None if got is None else got[0]

    async def allowed(self, who: Who, question: Question) -> bool:
        """The kept answer, else the API server's (asked once for every caller waiting)."""
        got = self.answers.get(who, {}).get(question)
        if got is not None:
            return got[0]
        return await self._ask(who, question)

    async def _ask(self, who: Who, question: Question) -> bool:
        key = (who, question)
        fut = self._inflight.get(key)
        if fut is not None:
            return await asyncio.shield(fut)
        fut = self._inflight[key] = asyncio.get_running_loop().create_future()
        try:
            got = await self._review(who, question)
            answer = bool(got)
            at = time.monotonic() - (self.recheck - RETRY if got is None else 0.0)
            self.answers.setdefault(who, {})[question] = (answer, at)
            fut.set_result(answer)
            return answer
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # (retrieved: a caller that went away leaves no warning)
            raise
        finally:
            self._inflight.pop(key, None)

    async def _review(self, who: Who, question: Question) -> bool | None:
        """The API server's answer; None when it could not be asked."""
        async with self._gate:
            self.asked += 1
            try:
                raw = await self.client.request("POST", SAR_PATH, body=review_body(who, question))
                doc = orjson.loads(raw)
            except (ApiProblem, ConnectionProblem, BadAnswer, orjson.JSONDecodeError, OSError, TimeoutError):
                return None
        status = doc.get("status") if isinstance(doc, dict) else None
        return isinstance(status, dict) and status.get("allowed") is True

    def forget(self, who: Who) -> None:
        """No session of `who` is left: its answers go."""
        self.answers.pop(who, None)

    async def recheck_all(self, *, due_only: bool = False) -> dict[Who, set[Question]]:
        """Every kept answer asked again (`due_only`: those older than `recheck`); the questions
        whose answer changed, per identity."""
        now = time.monotonic()
        jobs = [(who, q) for who, qs in self.answers.items() for q, (_, at) in list(qs.items())
                if not due_only or now - at >= self.recheck]
        if not jobs:
            return {}

        async def one(who: Who, q: Question) -> tuple[Who, Question, bool | None]:
            return who, q, await self._review(who, q)

        changed: dict[Who, set[Question]] = {}
        for who, q, got in await asyncio.gather(*(one(w, q) for w, q in jobs)):
            kept = self.answers.get(who)
            if kept is None:  # (forgotten meanwhile)
                continue
            before = kept.get(q)
            if got is None:  # (not asked: the answer stays, asked again soon)
                if before is not None:
                    kept[q] = (before[0], time.monotonic() - self.recheck + RETRY)
                continue
            answer = got
            kept[q] = (answer, time.monotonic())
            if before is None or before[0] != answer:
                changed.setdefault(who, set()).add(q)
        return changed
