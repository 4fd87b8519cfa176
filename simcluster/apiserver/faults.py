"""Fault injection for tests: failures, latency and stalls, slow bodies, expired continue tokens, and
a log of served requests.

- `fail_next(path, status)`: the next matching requests answered with an error Status (429 with
  Retry-After);
- `latency`: every request waits this long before it is served;
- `stall_next(path, after_bytes)`: the next matching response (a watch, a log) stops after
  `after_bytes` of body and hangs, the connection open and silent (no FIN), until the client
  goes away;
- `slow_body_next(path, seconds)`: the next matching LIST's body is sent in pieces spread over
  `seconds` (a slow link: the transfer outlasts a request timeout while bytes keep coming);
- `delay_next(path, seconds)`: the next matching requests wait `seconds` before they are served
  (one path silent, as an exec upgrade that never comes, while the rest answer);
- `answer_next(path, body)`: the next matching requests answered with `body` as it is (HTML, a
  JSON array, truncated JSON: what a proxy, a captive portal or a broken server sends), whatever
  they asked for;
- `expire_continue_next()`: the next LIST page asked for with a `continue` token finds the store
  compacted (410 Expired, as etcd's compaction between pages does); `before` runs first (a
  change made between the pages);
- `ObjectStore.expire_watches()`: every open watch gets an in-band ERROR 410 mid-stream.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from urllib.parse import parse_qs


@dataclass
class FailRule:
    pattern: re.Pattern[str]
    status: int
    remaining: int
    retry_after: int = 1
    method: str | None = None


@dataclass
class StallRule:
    pattern: re.Pattern[str]
    after_bytes: int
    remaining: int


@dataclass
class SlowRule:
    pattern: re.Pattern[str]
    seconds: float
    remaining: int


@dataclass
class DelayRule:
    pattern: re.Pattern[str]
    seconds: float
    remaining: int


@dataclass
class AnswerRule:
    pattern: re.Pattern[str]
    body: bytes
    content_type: str
    status: int
    remaining: int
    method: str | None = None


@dataclass
class ContinueRule:
    pattern: re.Pattern[str]
    remaining: int
    before: Callable[[], None] | None = None


@dataclass(frozen=True)
class RequestRecord:
    """One answered request.

    `verb` is the API verb the server resolved (``get`` for one object, ``list``, ``watch`` for a
    ``?watch=1`` GET, ``create``, ``update``, ``patch``, ``delete``, ``deletecollection``; ``""``
    for discovery and other non-resource paths). `query` is the raw query string, also read as
    `params` and the properties below; `accept` is the Accept header as sent; `representation`
    is what a GET, LIST or WATCH was answered with: ``""`` for the objects themselves, else
    ``"Table"``, ``"PartialObjectMetadata"`` or ``"PartialObjectMetadataList"`` (a watch asking for
    ``PartialObjectMetadataList`` is answered with the objects, as kube-apiserver does, but keeps
    the kind it negotiated).
    """

    at: float
    method: str
    path: str
    query: str
    verb: str
    user: str
    status: int
    accept: str = ""
    representation: str = ""

    @cached_property
    def params(self) -> dict[str, str]:
        """The query parameters (the last value of each)."""
        return {k: v[-1] for k, v in parse_qs(self.query, keep_blank_values=True).items()}

    @property
    def label_selector(self) -> str:
        return self.params.get("labelSelector", "")

    @property
    def field_selector(self) -> str:
        return self.params.get("fieldSelector", "")

    @property
    def include_object(self) -> str:
        return self.params.get("includeObject", "")

    @property
    def watch(self) -> bool:
        return self.verb == "watch"

    @property
    def resource(self) -> str:
        """The resource (plural) a resource request named, e.g. ``pods`` for a LIST, a WATCH, a GET
        of one pod or of its log; ``""`` for other paths."""
        parts = [p for p in self.path.split("/") if p]
        if parts[:1] == ["api"]:
            rest = parts[2:]
        elif parts[:1] == ["apis"]:
            rest = parts[3:]
        else:
            return ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            rest = rest[2:]
        return rest[0] if rest else ""

    @property
    def full_objects(self) -> bool:
        """A LIST answered with whole objects (no Table, no PartialObjectMetadataList)."""
        return self.verb == "list" and self.representation not in ("Table", "PartialObjectMetadataList")


@dataclass
class Faults:
    latency: float = 0.0
    fail_rules: list[FailRule] = field(default_factory=list)
    stall_rules: list[StallRule] = field(default_factory=list)
    slow_rules: list[SlowRule] = field(default_factory=list)
    continue_rules: list[ContinueRule] = field(default_factory=list)
    answer_rules: list[AnswerRule] = field(default_factory=list)
    delay_rules: list[DelayRule] = field(default_factory=list)

    def fail_next(
        self,
        path_regex: str,
        status: int,
        count: int = 1,
        *,
        retry_after: int = 1,
        method: str | None = None,
    ) -> None:
        """The next `count` requests whose path matches fail with `status`."""
        self.fail_rules.append(
            FailRule(re.compile(path_regex), status, count, retry_after, method and method.upper())
        )

    def delay_next(self, path_regex: str, seconds: float, count: int = 1) -> None:
        """The next `count` requests whose path matches wait `seconds` before they are served."""
        self.delay_rules.append(DelayRule(re.compile(path_regex), seconds, count))

    def take_delay(self, path: str) -> DelayRule | None:
        for rule in self.delay_rules:
            if rule.remaining > 0 and rule.pattern.search(path):
                rule.remaining -= 1
                if rule.remaining == 0:
                    self.delay_rules.remove(rule)
                return rule
        return None

    async def held_or_answered(self, method: str, path: str) -> AnswerRule | None:
        """Before a request is served: held as `delay_next` says, then the answer `answer_next`
        gives it instead (None: served as usual)."""
        delay = self.take_delay(path)
        if delay is not None:
            await asyncio.sleep(delay.seconds)
        return self.take_answer(method, path)

    def answer_next(self, path_regex: str, body: bytes, *, content_type: str = "text/html", status: int = 200,
                    count: int = 1, method: str | None = None) -> None:
        """The next `count` requests whose path matches are answered `status` with `body` (of
        `content_type`), whatever they asked for."""
        self.answer_rules.append(AnswerRule(re.compile(path_regex), body, content_type, status, count,
                                            method and method.upper()))

    def take_answer(self, method: str, path: str) -> AnswerRule | None:
        for rule in self.answer_rules:
            if rule.method and rule.method != method:
                continue
            if rule.remaining > 0 and rule.pattern.search(path):
                rule.remaining -= 1
                if rule.remaining == 0:
                    self.answer_rules.remove(rule)
                return rule
        return None

    def stall_next(self, path_regex: str, after_bytes: int = 0, count: int = 1) -> None:
        """The next `count` matching responses stop after `after_bytes` of body and hang."""
        self.stall_rules.append(StallRule(re.compile(path_regex), after_bytes, count))

    def slow_body_next(self, path_regex: str, seconds: float, count: int = 1) -> None:
        """The next `count` matching LIST bodies are sent in pieces spread over `seconds`."""
        self.slow_rules.append(SlowRule(re.compile(path_regex), seconds, count))

    def expire_continue_next(self, path_regex: str = "", count: int = 1,
                             before: Callable[[], None] | None = None) -> None:
        """The next `count` LISTs whose path matches and that carry a `continue` token find the
        store compacted: 410 Expired. `before()` runs on the server's loop just before (e.g. a
        pod removed between the pages)."""
        self.continue_rules.append(ContinueRule(re.compile(path_regex), count, before))

    def clear(self) -> None:
        self.latency = 0.0
        self.fail_rules.clear()
        self.stall_rules.clear()
        self.slow_rules.clear()
        self.continue_rules.clear()
        self.answer_rules.clear()
        self.delay_rules.clear()

    def take_failure(self, method: str, path: str) -> FailRule | None:
        for rule in self.fail_rules:
            if rule.method and rule.method != method:
                continue
            if rule.remaining > 0 and rule.pattern.search(path):
                rule.remaining -= 1
                if rule.remaining == 0:
                    self.fail_rules.remove(rule)
                return rule
        return None

    def take_stall(self, path: str) -> StallRule | None:
        for rule in self.stall_rules:
            if rule.remaining > 0 and rule.pattern.search(path):
                rule.remaining -= 1
                if rule.remaining == 0:
                    self.stall_rules.remove(rule)
                return rule
        return None


    def take_slow(self, path: str) -> SlowRule | None:
        for rule in self.slow_rules:
            if rule.remaining > 0 and rule.pattern.search(path):
                rule.remaining -= 1
                if rule.remaining == 0:
                    self.slow_rules.remove(rule)
                return rule
        return None

    def take_continue_expiry(self, path: str) -> ContinueRule | None:
        for rule in self.continue_rules:
            if rule.remaining > 0 and rule.pattern.search(path):
                rule.remaining -= 1
                if rule.remaining == 0:
                    self.continue_rules.remove(rule)
                return rule
        return None


class RequestLog:
    """The most recent requests the server answered (bounded), oldest first.

    Each `RequestRecord` has the method, path, query (with the label and field selectors,
    ``includeObject`` and ``watch`` as properties), the verb (``list`` vs ``watch`` vs ``get``),
    the Accept header and the representation served, so a test can say what a client asked for:
    ``sim.requests.full_lists("pods", since=t0) == []`` is "no LIST of whole pods was made"
    (a LIST of pods not answered with a Table or a PartialObjectMetadataList, whatever its
    selectors; `full_lists(..., unfiltered=True)` keeps only those without a selector).
    """

    def __init__(self, size: int = 100_000) -> None:
        self._items: deque[RequestRecord] = deque(maxlen=size)

    def add(self, rec: RequestRecord) -> None:
        self._items.append(rec)

    def since(self, t: float) -> list[RequestRecord]:
        return [r for r in self._items if r.at >= t]

    def all(self) -> list[RequestRecord]:
        return list(self._items)

    def count(self, verb: str, since: float = 0.0, path_contains: str = "") -> int:
        return sum(
            1 for r in self._items if r.verb == verb and r.at >= since and path_contains in r.path
        )

    def of(self, verb: str, resource: str, since: float = 0.0) -> list[RequestRecord]:
        """The requests with `verb` (``get``, ``list``, ``watch``, ...) on `resource` (a plural such
        as ``pods``) since `since`."""
        return [r for r in self._items if r.at >= since and r.verb == verb and r.resource == resource]

    def full_lists(self, resource: str = "pods", since: float = 0.0, *, unfiltered: bool = False
                   ) -> list[RequestRecord]:
        """The LISTs of `resource` answered with whole objects since `since` (with
        `unfiltered`, only those without a label or field selector)."""
        return [r for r in self.of("list", resource, since) if r.full_objects
                and not (unfiltered and (r.label_selector or r.field_selector))]

    @staticmethod
    def now() -> float:
        return time.time()
