"""#24 item 4g: `diagnostics.leftovers`, the ranks of a finished job still running on GPUs."""

from __future__ import annotations

from monitors.diagnostics.leftovers import still_held, still_held_all
from monitors.model import LiveModel
from monitors.parse import parse_pod
from tests.kubeflow_objects import job, pod
from tests.unit.test_model import load


def test_a_finished_job_s_running_ranks_on_gpus_and_the_line_that_frees_them() -> None:
    m = LiveModel()
    terminating = pod("PyTorchJob", "gone", "a", "Worker", 0)
    terminating["metadata"].update(deletionTimestamp="2026-11-01T00:05:30Z", deletionGracePeriodSeconds=30)
    assert parse_pod(terminating).deleting
    load(m, [job("PyTorchJob", "left", "a", {"Master": 1, "Worker": 2}, conditions=[("Failed", "")]),
             job("PyTorchJob", "done", "a", {"Master": 1, "Worker": 1}, conditions=[("Succeeded", "")]),
             job("PyTorchJob", "gone", "a", {"Master": 1, "Worker": 1}, conditions=[("Failed", "")]),
             job("PyTorchJob", "live", "a", {"Master": 1, "Worker": 1}, conditions=[("Running", "")])],
         [pod("PyTorchJob", "left", "a", "Master", 0), pod("PyTorchJob", "left", "a", "Worker", 0),
          pod("PyTorchJob", "left", "a", "Worker", 1, phase="Failed", terminated=(1, "Error")),
          pod("PyTorchJob", "done", "a", "Worker", 0, gpus=2), terminating,
          pod("PyTorchJob", "live", "a", "Master", 0)])
    w = m.workloads
    left = still_held(w[("a", "PyTorchJob", "left")])
    assert left is not None and left.ranks == ("master-0", "worker-0") and left.gpus == 2 and left.mark == "holds 2 GPUs"
    since = left.since
    assert since is not None
    assert left.sentence(since + 18 * 60, "ranks --context x") == (
        "2 ranks still running on 2 GPUs since it failed 18m ago: `ranks --context x delete left -p a` frees them")
    done = still_held(w[("a", "PyTorchJob", "done")])
    assert done is not None and done.sentence(since + 5, "ranks").startswith(
        "1 rank still running on 2 GPUs since it finished 5s ago: `ranks delete done -p a`")
    assert still_held(w[("a", "PyTorchJob", "gone")]) is None  # (its last pod is on its way out)
    assert still_held(w[("a", "PyTorchJob", "live")]) is None
    assert [h.name for h in still_held_all(w.values())] == ["done", "left"]  # (as many GPUs: by time, name)
