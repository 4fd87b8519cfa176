"""GPU health on the ranks that use it (pure): the XID a failed rank's GPU raised shortly before it
exited, said with the first failure ("rank 2's GPU 0 on node n12 raised XID 79 at 12:03:10, 4 s
before it exited"), and the XIDs and throttling of the ranks that run, as `ranks why` findings.

An XID is known from Prometheus' history (`LiveModel.gpu_xids`: which GPU, and when it first
showed) or from the readings the dashboard took while the rank ran (`RankView.gpu_xid`, first seen
at a refresh; which of its GPUs is not known there).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from ..model_views import FirstFailure, GpuXid, RankView, WorkloadView
from .why import Diagnosis, Finding

WITHIN = 60.0  # an XID at most this long before the rank exited is said with its failure
EARLY = 5.0  # (an XID first seen a refresh after the exit still counts: the scrape came late)
# what the XIDs most seen on training nodes mean (NVIDIA's XID catalogue)
XID_MEANING = {
    13: "graphics engine exception", 31: "GPU memory page fault", 43: "GPU stopped processing",
    45: "preemptive cleanup", 48: "double-bit ECC error", 63: "ECC page retirement", 64: "ECC page retirement failed",
    74: "NVLink error", 79: "GPU has fallen off the bus", 92: "high single-bit ECC error rate",
    94: "contained ECC error", 95: "uncontained ECC error", 119: "GSP RPC timeout", 120: "GSP error",
}

PodKey = tuple[str, str]


def xid_text(code: int) -> str:
    meaning = XID_MEANING.get(code)
    return f"XID {code}" + (f" ({meaning})" if meaning else "")


def _rank_xid(wl: WorkloadView, r: RankView, xids: Mapping[PodKey, GpuXid]) -> GpuXid | None:
    ev = xids.get((wl.namespace, r.pod))
    if ev is None and r.gpu_xid and r.gpu_xid_at:
        ev = GpuXid(wl.namespace, r.pod, r.node, None, r.gpu_xid, r.gpu_xid_at)
    return ev


def failure_xid(wl: WorkloadView, xids: Mapping[PodKey, GpuXid]) -> GpuXid | None:
    """The XID the first failed rank's GPU raised within `WITHIN` seconds before it exited, or None."""
    ff = wl.first_failure
    rank = next((r for r in wl.ranks if ff is not None and r.pod == ff.pod), None)
    if ff is None or not ff.at or rank is None:
        return None
    ev = _rank_xid(wl, rank, xids)
    if ev is None or not -EARLY <= ff.at - ev.at <= WITHIN:
        return None
    if rank.created is not None and ev.at < rank.created:  # an earlier pod of the same name (a rerun)
        return None
    return ev


def xid_sentence(ff: FirstFailure, ev: GpuXid) -> str:
    who = f"rank {ff.rank}" if ff.rank is not None else ff.label
    gpu = f"GPU {ev.gpu}" if ev.gpu is not None else "GPU"
    node = f" on node {ev.node}" if ev.node else ""
    before = max(0.0, ff.at - ev.at) if ff.at else 0.0
    return (f"{who}'s {gpu}{node} raised {xid_text(ev.code)} at {time.strftime('%H:%M:%S', time.localtime(ev.at))}, "
            f"{before:.0f} s before it exited")


def failure_gpu_line(wl: WorkloadView, xids: Mapping[PodKey, GpuXid]) -> str:
    """The first failure's GPU cause as one sentence, or ""."""
    ev = failure_xid(wl, xids)
    return xid_sentence(wl.first_failure, ev) if ev is not None and wl.first_failure is not None else ""


def gpu_findings(wl: WorkloadView, xids: Mapping[PodKey, GpuXid]) -> list[Finding]:
    """`gpu` findings: the first failure's XID, then each other rank's XID and throttling."""
    out: list[Finding] = []
    line = failure_gpu_line(wl, xids)
    if line:
        out.append(Finding("gpu", line[0].upper() + line[1:] + "."))
    failed_pod = wl.first_failure.pod if line and wl.first_failure is not None else None
    for r in wl.ranks:
        ev = _rank_xid(wl, r, xids) if r.pod != failed_pod else None
        if ev is not None:
            where = f"GPU {ev.gpu} on node {ev.node}" if ev.gpu is not None else f"GPUs on node {r.node or '?'}"
            out.append(Finding("gpu", f"{r.label}'s {where} raised {xid_text(ev.code)} (first seen "
                                      f"{time.strftime('%H:%M:%S', time.localtime(ev.at))})."))
        if r.gpu_throttle and r.phase == "Running":
            out.append(Finding("gpu", f"{r.label}'s GPUs are throttled ({', '.join(r.gpu_throttle)}): its clocks "
                                      "are held down, it runs slower than its peers may."))
    return out


def with_gpu_findings(d: Diagnosis, wl: WorkloadView, xids: Mapping[PodKey, GpuXid]) -> Diagnosis:
    import dataclasses

    found = gpu_findings(wl, xids)
    if not found:
        return d
    return dataclasses.replace(d, findings=(*d.findings, *found), summary=d.summary if not d.ok else
                               found[0].text.rstrip("."))
