"""Fault injection for tests: failures, latency and stalls, and a log of served requests."""

from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass, field


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


@dataclass(frozen=True, slots=True)
class RequestRecord:
    at: float
    method: str
    path: str
    query: str
    verb: str  # get, list, watch, create, update, patch, delete, ... or "" for non-resource
    user: str
    status: int


@dataclass
class Faults:
    latency: float = 0.0
    fail_rules: list[FailRule] = field(default_factory=list)
    stall_rules: list[StallRule] = field(default_factory=list)

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

    def stall_next(self, path_regex: str, after_bytes: int = 0, count: int = 1) -> None:
        """The next `count` matching responses stop after `after_bytes` of body and hang."""
        self.stall_rules.append(StallRule(re.compile(path_regex), after_bytes, count))

    def clear(self) -> None:
        self.latency = 0.0
        self.fail_rules.clear()
        self.stall_rules.clear()

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


class RequestLog:
    """The most recent requests the server answered (bounded)."""

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

    @staticmethod
    def now() -> float:
        return time.time()
