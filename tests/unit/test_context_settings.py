"""#24 item 4e: one hang threshold per cluster, said with its source. A kubeconfig context may carry
ranks' settings in its `ranks` extension (`ranks demo` writes `hang_after_minutes: 1` there);
precedence: the configuration file's explicit value, then the context's, then the default; a bad
context value is one line naming the context. And 4f: `ranks why` prints no sentence twice."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitors.connection import load_cluster_config, write_context_settings
from monitors.diagnostics.hangs import assess
from monitors.diagnostics.why import Diagnosis
from tests.unit.test_hangs import NOW, hist_for, hung_job
from tui.cli.diagnose import with_health
from tui.cli.why import diagnosis_text
from tui.settings import SettingsError, hang_after, hang_thresholds, load_settings

KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "ranks-sim",
    "clusters": [{"name": "ranks-sim", "cluster": {"server": "https://127.0.0.1:6443"}}],
    "users": [{"name": "admin", "user": {"token": "t0ken"}}, {"name": "alice", "user": {"token": "al1ce"}}],
    "contexts": [
        {"name": "ranks-sim", "context": {"cluster": "ranks-sim", "user": "admin", "extensions": [
            {"name": "context_info", "extension": {"provider": "minikube.sigs.k8s.io"}}]}},
        {"name": "ranks-sim-alice", "context": {"cluster": "ranks-sim", "user": "alice", "namespace": "runai-team-a"}},
    ],
}


def kubeconfig(tmp_path: Path, doc: dict[str, Any] = KUBECONFIG) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_demo_writes_its_threshold_into_every_context_and_ranks_reads_it(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path)
    write_context_settings(path, {"hang_after_minutes": 1.0})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    doc = yaml.safe_load(path.read_text())
    first = doc["contexts"][0]["context"]["extensions"]
    assert first[0]["name"] == "context_info"  # another tool's extension is kept
    assert first[1] == {"name": "ranks", "extension": {"hang_after_minutes": 1.0}}
    for context in ("ranks-sim", "ranks-sim-alice"):
        cfg = load_cluster_config(str(path), context)
        assert cfg.context_settings == {"hang_after_minutes": 1.0}
        defaults = load_settings(None, {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")})
        assert hang_after(defaults, cfg) == (1.0, f"hang_after_minutes of context {context}")
    write_context_settings(path, {"idle_threshold_percent": 3})  # merged into what the context had
    assert load_cluster_config(str(path), None).context_settings == {"hang_after_minutes": 1.0,
                                                                      "idle_threshold_percent": 3}


def test_the_configuration_file_wins_then_the_context_then_the_default(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path)
    write_context_settings(path, {"hang_after_minutes": 1})
    cfg = load_cluster_config(str(path), None)
    home = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert hang_after(load_settings(None, home), cfg) == (1.0, "hang_after_minutes of context ranks-sim")
    (tmp_path / "plain").mkdir()
    plain = load_cluster_config(str(kubeconfig(tmp_path / "plain")), None)
    assert hang_after(load_settings(None, home), plain) == (10.0, "the default hang_after_minutes")
    file = tmp_path / "config.toml"
    file.write_text("hang_after_minutes = 5\n")
    assert hang_after(load_settings(file), cfg) == (5.0, f"hang_after_minutes in {file}")
    th = hang_thresholds(load_settings(None, home), cfg)
    assert (th.hang_after, th.said()) == (60.0, "hung after 1m: hang_after_minutes of context ranks-sim")


@pytest.mark.parametrize("bad", [0, -1, "ten", True, None, [1]])
def test_a_bad_context_value_is_one_line_naming_the_context(tmp_path: Path, bad: Any) -> None:
    path = kubeconfig(tmp_path)
    write_context_settings(path, {"hang_after_minutes": bad})
    cfg = load_cluster_config(str(path), None)
    with pytest.raises(SettingsError) as info:
        hang_after(load_settings(None, {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "x")}), cfg)
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith("kubeconfig context ranks-sim: extension ranks: hang_after_minutes: must be a number"), text


def test_why_says_a_stalled_job_s_sentence_once() -> None:
    wl = hung_job(last_log=NOW - 300)
    health = assess(wl, hist_for(wl, (90.0, 600), (0.0, 300)), NOW)  # idle 5m, hung after 10m
    assert health.quiet_for == 300
    d = with_health(Diagnosis(wl.namespace, wl.kind, wl.name, wl.status, "nothing wrong", ()), health)
    text = diagnosis_text(d, wl)
    sentences = [s.strip() for line in text.splitlines() for s in line.split(": ", 1)[1:]]
    assert len(sentences) == len(set(sentences)), text
    head, *rest = text.splitlines()
    assert head.endswith("is Running: no progress for 5m"), head
    assert rest == ["  quiet: no progress for 5m: every GPU under 5% and every rank's log silent "
                    "(hung after 10m: hang_after_minutes)"], rest
