"""#24 item 4c and 4d: the data loop sends a hang again as it grows (the dashboard's `▲ hung 2m48s`
stayed the same from age 3m to 18m: the verdict was sent only when its mark changed), and again
once the ranks' logs are followed (its words said "no rank's log is followed" while the detail
showed steps read from those logs)."""

from __future__ import annotations

import calendar

from monitors.dataloop import Judging
from monitors.dataloop.health import HealthJudge
from monitors.diagnostics.hangs import Thresholds
from monitors.model import GpuReading, LiveModel
from monitors.parse import parse_job, parse_namespace, parse_pod
from tests.kubeflow_objects import job, pod
from tests.unit.test_hangs import Clock, _stamp

NS = "runai-team-b"
KEY = (NS, "PyTorchJob", "gpt-hung")


def test_a_hang_is_sent_again_as_it_grows_and_once_its_logs_are_read() -> None:
    t0 = calendar.timegm((2026, 11, 1, 8, 0, 0))
    clock = Clock(t0)
    m = LiveModel(now=clock)
    m.apply_namespaces([(NS, parse_namespace({"metadata": {"name": NS}}))])
    rec = parse_job("PyTorchJob", "kubeflow.org", "v1")(
        _stamp(job("PyTorchJob", "gpt-hung", NS, {"Master": 1, "Worker": 1}, conditions=[("Running", "")]), t0))
    m.apply_jobs([(rec.key, rec)])
    pods = [parse_pod(_stamp(pod("PyTorchJob", "gpt-hung", NS, r, 0), t0)) for r in ("Master", "Worker")]
    m.apply_pods([(p.key, p) for p in pods])
    m.flush()

    def refresh(until: float) -> None:  # the metrics refreshes, every 5 s: busy for 20 s, then idle
        while clock.t < until:
            clock.t += 5
            m.set_gpu({p.key: GpuReading("ok", 90.0 if clock.t < t0 + 20 else 0.0, 100.0, 81559.0)
                       for p in pods}, {})
            m.flush()

    judge = HealthJudge(Judging(thresholds=Thresholds(hang_after=60), clock=clock))
    refresh(t0 + 180)
    first = judge.assess(m)
    assert first is not None and first[KEY].hung
    assert "no rank's log is followed" in first[KEY].summary

    refresh(t0 + 480)  # five minutes later, still hung: sent again, with the longer hang
    later = judge.assess(m)
    assert later is not None, "the same hang, five minutes longer, was not sent again"
    assert later[KEY].hung_for is not None and first[KEY].hung_for is not None
    assert later[KEY].hung_for - first[KEY].hung_for >= 290
    assert later[KEY].summary != first[KEY].summary

    for p in pods:  # the detail follows their logs: the last lines were written 20 s in
        m.note_log(p.namespace, p.name, t0 + 20)
    read = judge.assess(m)
    assert read is not None and read[KEY].hung and read[KEY].logs_confirmed
    assert "no rank's log is followed" not in read[KEY].summary and "log silent" in read[KEY].summary
    assert judge.assess(m) is None  # nothing moved since: nothing sent
