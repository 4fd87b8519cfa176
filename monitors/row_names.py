"""Which Table-row pods a workload may claim by its name, without a hint per name prefix.

A pod listed as a Table row is grouped by its name (`pod_rows.infer`): a workload named N may claim
any row whose name starts with N + "-" (N is then one of `pod_rows.name_prefixes`). The live model
kept each row under every such prefix (about five a pod: 500,000 set members, ~35 MB at 100,000
pods); here each namespace's row names are one sorted list, and the rows a workload may claim are
found by bisection: the same pods, a pointer a pod.
"""

from __future__ import annotations

from bisect import bisect_left, insort

MAX_NAME = 253  # a longer name is no object name Kubernetes accepts: no workload claims it (`name_prefixes`)


class RowNames:
    def __init__(self) -> None:
        self._by_ns: dict[str, list[str]] = {}

    def add(self, namespace: str, name: str) -> None:
        if len(name) <= MAX_NAME:
            insort(self._by_ns.setdefault(namespace, []), name)

    def discard(self, namespace: str, name: str) -> None:
        names = self._by_ns.get(namespace)
        if names is None:
            return
        i = bisect_left(names, name)
        if i < len(names) and names[i] == name:
            del names[i]
            if not names:
                del self._by_ns[namespace]

    def claimable(self, namespace: str, workload: str) -> list[tuple[str, str]]:
        """The (namespace, name) of the rows a workload named `workload` may claim."""
        names = self._by_ns.get(namespace)
        if not names:
            return []
        start = workload + "-"
        i = bisect_left(names, start)
        out = []
        while i < len(names) and names[i].startswith(start):
            out.append((namespace, names[i]))
            i += 1
        return out
