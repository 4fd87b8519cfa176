"""`ranks demo --workdir DIR` (`make demo`'s .ranks-demo/): what the demo wrote goes when it quits,
DIR with it, unless the user keeps other files there (#24). The whole run is tested in tmux
(tests/e2e/test_demo_tmux.py); this is the directory the user chose holding files of theirs."""

from __future__ import annotations

from pathlib import Path

from tui.cli.dashboard import remove_demo_workdir


def demo_files(base: Path) -> None:
    (base / "sim" / "logs" / "pod").mkdir(parents=True)
    (base / "sim" / "logs" / "pod" / "0.log").write_text("line\n")
    (base / "prometheus" / "wal").mkdir(parents=True)
    (base / "kubeconfig").write_text("apiVersion: v1\n")


def test_the_demo_s_workdir_goes_with_what_it_wrote(tmp_path: Path) -> None:
    base = tmp_path / ".ranks-demo"
    demo_files(base)
    remove_demo_workdir(base)
    assert not base.exists()
    remove_demo_workdir(base)  # (already gone: nothing to do)


def test_a_workdir_holding_the_user_s_files_keeps_them(tmp_path: Path) -> None:
    base = tmp_path / "mine"
    demo_files(base)
    (base / "notes.txt").write_text("mine\n")
    remove_demo_workdir(base)
    assert sorted(p.name for p in base.iterdir()) == ["notes.txt"]
