"""Training progress from log lines (#15): `monitors.diagnostics.progress` — the built-in formats
(tqdm, Lightning, Hugging Face Trainer, Horovod / TensorFlow / Keras, free text, JSON lines), user
patterns, per-rank rate and history, the board's ETA (the slowest rank decides) and robustness."""

from __future__ import annotations

import math
import random

import pytest

from monitors.diagnostics.progress import (
    BUILTIN,
    MAX_LINE,
    ProgressBoard,
    RankProgress,
    Sample,
    compile_patterns,
    parse_line,
)

# (line, step, total, loss, throughput, unit, epoch, source); lines in the tools' own output formats
CASES = [
    # tqdm, and PyTorch Lightning's tqdm bar
    ("  37%|███▋      | 370/1000 [01:02<01:45,  5.98it/s, loss=0.412]",
     370, 1000, 0.412, 5.98, "it/s", None, "tqdm"),
    ("Epoch 3:  45%|████▌     | 450/1000 [00:41<00:50, 10.9it/s, loss=1.23, v_num=0]",
     450, 1000, 1.23, 10.9, "it/s", 3.0, "tqdm"),
    ("Epoch 0:  12%|█▏        | 12/100 [00:30<03:40,  2.50s/it, train_loss=0.7]",
     12, 100, 0.7, 0.4, "it/s", 0.0, "tqdm"),
    ("  0%|          | 0/1000 [00:00<?, ?it/s]", 0, 1000, None, None, None, None, "tqdm"),
    ("370it [01:02,  5.98it/s, loss=0.412]", 370, None, 0.412, 5.98, "it/s", None, "tqdm"),
    ("Training: 100%|██████████| 2.00k/2.00k [05:12<00:00, 1.20kit/s]", 2000, 2000, None, 1200.0, "it/s",
     None, "tqdm"),
    # Hugging Face Trainer: its log dicts and its bar
    ("{'loss': 1.2345, 'grad_norm': 3.2, 'learning_rate': 4.9e-05, 'epoch': 0.12}",
     None, None, 1.2345, None, None, 0.12, "dict"),
    ("{'train_runtime': 81.9123, 'train_samples_per_second': 12.3, 'train_steps_per_second': 0.77, "
     "'train_loss': 0.6132, 'epoch': 3.0}", None, None, 0.6132, 12.3, "samples/s", 3.0, "dict"),
    ("  5%|▌         | 50/1000 [00:10<03:10,  5.00it/s]", 50, 1000, None, 5.0, "it/s", None, "tqdm"),
    # Horovod / TensorFlow / Keras
    ("Step #120\tLoss: 2.301", 120, None, 2.301, None, None, None, "text"),
    ("2017-01-01 10:00:00.123456: step 120, loss = 2.30 (512.3 examples/sec; 0.250 sec/batch)",
     120, None, 2.30, 512.3, "examples/s", None, "text"),
    ("INFO:tensorflow:step = 120, loss = 2.301 (0.52 sec)", 120, None, 2.301, None, None, None, "text"),
    ("120/1000 [==>...........................] - ETA: 1:02 - loss: 0.4123 - accuracy: 0.87",
     120, 1000, 0.4123, None, None, None, "keras"),
    ("120/1000 ━━━━━━━━━━━━━━━━━━━━ 1:02 62ms/step - accuracy: 0.8700 - loss: 0.4123",
     120, 1000, 0.4123, 1 / 0.062, "it/s", None, "keras"),
    ("Train Epoch: 1 [1280/60000 (2%)]\tLoss: 0.512345", 1280, 60000, 0.512345, None, None, 1.0, "epoch-batch"),
    # free text
    ("[rank 3] step 42 loss=2.4871 lr=3.0e-04 throughput=15.2 samples/s",
     42, None, 2.4871, 15.2, "samples/s", None, "text"),
    ("step=42 loss=0.5", 42, None, 0.5, None, None, None, "text"),
    ("iter: 42 loss: 0.5", 42, None, 0.5, None, None, None, "text"),
    ("Step 100/1000", 100, 1000, None, None, None, None, "text"),
    (" iteration      100/  500000 | consumed samples:        12800 | lm loss: 6.123E+00 | loss scale: 65536.0 |",
     100, 500000, 6.123, None, None, None, "text"),
    ("2020-07-17 07:11:02 | INFO | train_inner | epoch 001:   2800 / 160368 loss=9.255, ppl=611.12, wps=57.3, "
     "ups=0.04, num_updates=2800, lr=2.8e-05", 2800, None, 9.255, 57.3, "words/s", 1.0, "text"),
    ("step 7 train_loss=0.9 tokens_per_sec=4100", 7, None, 0.9, 4100.0, "tokens/s", None, "text"),
    # JSON lines
    ('{"step": 42, "loss": 0.51, "samples_per_second": 120.5}', 42, None, 0.51, 120.5, "samples/s", None, "dict"),
    ('{"global_step": 43, "train_loss": 0.5, "tokens_per_sec": 9000}', 43, None, 0.5, 9000.0, "tokens/s", None,
     "dict"),
    ('{"iteration": 7, "throughput": 33.0, "max_steps": 100}', 7, 100, None, 33.0, "/s", None, "dict"),
    ('{"level": "info", "msg": "step 42 loss=0.5"}', 42, None, 0.5, None, None, None, "text"),
]


@pytest.mark.parametrize(("line", "step", "total", "loss", "tput", "unit", "epoch", "source"), CASES)
def test_builtin_formats(line: str, step: int | None, total: int | None, loss: float | None,
                         tput: float | None, unit: str | None, epoch: float | None, source: str) -> None:
    s = parse_line(line)
    assert s is not None, line
    assert (s.step, s.total, s.unit, s.source) == (step, total, unit, source)
    assert s.loss == pytest.approx(loss)
    assert s.throughput == pytest.approx(tput)
    assert s.epoch == pytest.approx(epoch)


@pytest.mark.parametrize("line", [
    "", "   ", "hello world", "Epoch 1/12", "Waiting for step 3 to finish", "loss=0.5",
    "{'eval_loss': 0.31, 'eval_runtime': 2.1, 'eval_samples_per_second': 50.0, 'epoch': 1.0}",
    '{"level": "info", "msg": "starting"}', "[rank 0] NCCL INFO comm 0x5 rank 0 nranks 8",
    "val_loss=0.3 step", "Traceback (most recent call last):", "50%|", "{", "{'loss': }",
])
def test_lines_without_progress(line: str) -> None:
    assert parse_line(line) is None


def test_the_demo_jobs_line() -> None:
    s = parse_line("[rank 3] step 42 loss=2.4871 lr=3.0e-04 throughput=15.2 samples/s")
    assert s == Sample(step=42, loss=2.4871, throughput=15.2, unit="samples/s", source="text")


@pytest.mark.parametrize("line", [
    "step 42 loss=nan", "step 42 loss=NaN throughput=inf samples/s", "[rank 1] step 42 loss=inf",
    "{'loss': nan, 'step': 42}", '{"step": 42, "loss": "NaN"}',
    "Epoch 3:  45%|████▌     | 42/1000 [00:41<00:50, 10.9it/s, loss=nan]",
])
def test_nan_and_inf_are_kept_as_none(line: str) -> None:
    s = parse_line(line)
    assert s is not None and s.step == 42
    assert s.loss is None
    assert s.throughput is None or math.isfinite(s.throughput)


def test_a_lone_nan_loss_is_no_sample() -> None:
    assert parse_line("loss=nan") is None
    assert parse_line("{'loss': nan, 'epoch': 0.5}") is None


def test_carriage_return_updates_are_read_at_the_last_one() -> None:
    bars = "\r".join(f" {i}%|█  | {i}/100 [00:0{i % 10}<00:10,  9.00it/s]" for i in range(1, 60))
    s = parse_line(bars + "\r")
    assert s is not None and s.step == 59
    hf = "  5%|▌         | 50/1000 [00:10<03:10,  5.00it/s]\r{'loss': 1.5, 'epoch': 0.05}"
    assert parse_line(hf) == Sample(loss=1.5, epoch=0.05, source="dict")


def test_only_the_first_4kb_are_read() -> None:
    assert parse_line("x" * MAX_LINE + " step 42 loss=0.5") is None
    s = parse_line("step 42 loss=0.5 " + "y" * 1_000_000)
    assert s is not None and s.step == 42


def test_garbage_never_raises() -> None:
    rng = random.Random(15)
    alphabet = "0123456789.:=/%|[]{}'\",;#-+eEnaifstpolx ━█▌\t\r\n\x00\x1b\ufffd"
    for _ in range(3000):
        n = rng.randint(0, 200)
        parse_line("".join(rng.choice(alphabet) for _ in range(n)))
    nasty = ["step " + "9" * 5000, "{" * 10000, "'" * 10000, "%|" * 5000, "step=" * 2000 + "1",
             "1/" + "[" * 5000, "loss=" + "1" * 5000 + "e99999", "step 1e999 loss=1e999", "\r" * 100,
             "{'step': 1e999, 'loss': -1e999}", "iter 42/0 loss 0.1", bytes(range(256)).decode("latin-1"),
             "step 42 loss=0.5 throughput=1e400 samples/s", "42/Unknown [====] - loss: 0.5"]
    for line in nasty:
        parse_line(line)
    board = ProgressBoard()
    for line in nasty:
        board.feed("r", 1.0, line)
    board.summary()
    board.eta(2.0)


def test_builtins_never_raise_on_a_failing_extractor() -> None:
    from monitors.diagnostics.progress import Pattern

    def boom(text: str) -> Sample | None:
        raise RuntimeError(text)

    assert parse_line("step 1 loss=2", (Pattern("boom", boom), *BUILTIN)) is not None


# ---------------------------------------------------------------- user patterns

def test_user_patterns_are_tried_first() -> None:
    patterns = compile_patterns([r"it (?P<step>\d+) of (?P<total>\d+).*?cost (?P<loss>\S+)",
                                 r"speed (?P<throughput>[\d.]+) (?P<unit>img)/s"])
    assert [p.name for p in patterns] == ["user:" + r"it (?P<step>\d+) of (?P<total>\d+).*?cost (?P<loss>\S+)",
                                          r"user:speed (?P<throughput>[\d.]+) (?P<unit>img)/s"]
    s = parse_line("it 5 of 50, cost 0.25 (step 999 loss=9)", [*patterns, *BUILTIN])
    assert s is not None and (s.step, s.total, s.loss) == (5, 50, 0.25)
    s = parse_line("speed 33.5 img/s", patterns)
    assert s is not None and (s.throughput, s.unit, s.step) == (33.5, "img/s", None)
    board = ProgressBoard(patterns)
    assert board.feed("0", 1.0, "it 5 of 50, cost 0.25 step 999 loss=9")
    assert board.ranks["0"].step == 5
    assert board.feed("0", 2.0, "step 6 loss=0.2")  # the built-ins still read the rest
    assert board.ranks["0"].step == 6
    assert not board.feed("0", 3.0, "cost nothing")


def test_user_pattern_garbage_values_are_none() -> None:
    (p,) = compile_patterns([r"S(?P<step>\S+) L(?P<loss>\S+)"])
    s = parse_line("Sabc L0.5", [p])
    assert s is not None and s.step is None and s.loss == 0.5
    assert parse_line("Sabc Lxyz", [p]) is None


@pytest.mark.parametrize("regex", [r"step (?P<step>\d+", r"(?P<step>\d+) (?P<step>\d+)", r"*", r"step (\d+)",
                                   r"loss (?P<lr>\S+)"])
def test_bad_user_patterns_raise_a_one_line_value_error(regex: str) -> None:
    with pytest.raises(ValueError) as info:
        compile_patterns(["step (?P<step>\\d+)", regex])
    msg = str(info.value)
    assert "\n" not in msg
    assert repr(regex) in msg


# ---------------------------------------------------------------- rate, history, ETA

def feed_steps(board: ProgressBoard, label: str, start: float, steps_per_s: float, n: int, total: int = 1000,
               every: float = 1.0) -> None:
    for i in range(n):
        t = start + i * every
        step = int(steps_per_s * (t - start))
        board.feed(label, t, f"step {step}/{total} loss={1 / (1 + step):.4f} throughput=8.0 samples/s")


def test_rate_is_steps_per_second_over_the_recent_window() -> None:
    r = RankProgress()
    for i in range(200):  # 2 steps/s for 100 s, then 10 steps/s
        r.add(float(i), Sample(step=2 * i if i < 100 else 200 + 10 * (i - 100), source="t"))
    assert r.rate() == pytest.approx(10.0)
    assert r.rate(window=30) == pytest.approx(10.0)
    # a window reaching past the change mixes both paces, back to the oldest sample kept (the 80th)
    assert r.rate(window=1000) == pytest.approx((1190 - 160) / (199 - 80))


def test_rate_restarts_with_the_step() -> None:
    r = RankProgress()
    for i in range(10):
        r.add(float(i), Sample(step=900 + 50 * i, total=1000, source="t"))
    for i in range(3):  # a new epoch's bar
        r.add(10.0 + i, Sample(step=5 * i, total=1000, source="t"))
    assert r.rate() == pytest.approx(5.0)


def test_rate_unknown_then_from_tqdm() -> None:
    r = RankProgress()
    assert r.rate() is None
    r.add(1.0, Sample(step=3, source="t"))
    assert r.rate() is None
    r.add(1.0, Sample(step=4, source="t"))  # no time between them
    assert r.rate() is None
    t = RankProgress()
    t.add(1.0, parse_line("  5%|▌         | 50/1000 [00:10<03:10,  5.00it/s]") or Sample())
    assert t.rate() == 5.0


def test_history_is_bounded_and_latest_values_stick() -> None:
    r = RankProgress(maxlen=120)
    for i in range(500):
        r.add(float(i), Sample(step=i, loss=1.0 / (i + 1), throughput=10.0, unit="samples/s", source="t"))
    assert len(r.history) == 120
    assert r.history[0].step == 380
    r.add(501.0, Sample(throughput=11.0, unit="samples/s", source="t"))
    assert (r.step, r.loss, r.throughput, r.unit) == (499, pytest.approx(1 / 500), 11.0, "samples/s")
    assert len(r.sparkline_values()) == 119
    assert r.sparkline_values()[-1] == pytest.approx(1 / 500)


def test_sparkline_falls_back_to_throughput() -> None:
    r = RankProgress()
    for i, v in enumerate([10.0, 12.0, 11.0]):
        r.add(float(i), Sample(step=i, throughput=v, unit="it/s", source="t"))
    assert r.sparkline_values() == [10.0, 12.0, 11.0]
    assert RankProgress().sparkline_values() == []


def test_eta_is_the_slowest_ranks() -> None:
    board = ProgressBoard()
    feed_steps(board, "worker-0", 0.0, 10.0, 31)  # 300 at t=30, 10 steps/s: 70 s left
    feed_steps(board, "worker-1", 0.0, 10.0, 31)
    feed_steps(board, "worker-3", 0.0, 5.0, 31)  # the straggler: 150 at t=30, 5 steps/s: 170 s left
    assert board.ranks["worker-3"].rate() == pytest.approx(5.0)
    assert board.eta(30.0) == pytest.approx(170.0)
    assert board.eta(40.0) == pytest.approx(160.0)  # counted down from its last line
    del board.ranks["worker-3"]
    assert board.eta(30.0) == pytest.approx(70.0)


def test_a_rank_that_stopped_stepping_leaves_no_eta() -> None:
    """The demo's gpt-hung showed `ETA 2d7h` while hung: its last rate counted down from the last
    step for ever. A rank without a step for 10 of its steps' time (a minute at least) stopped."""
    board = ProgressBoard()
    feed_steps(board, "worker-0", 0.0, 0.5, 11, total=100, every=2.0)  # a step every 2 s, the 10th at t=20: 180 s left
    assert board.eta(20.0) == pytest.approx(180.0)
    assert board.eta(79.0) == pytest.approx(121.0)  # a minute without a step: still counted down
    assert board.eta(81.0) is None  # 61 s without a step (over 10 steps' time): hung, no ETA


def test_eta_with_the_total_from_another_rank() -> None:
    board = ProgressBoard()
    board.feed("0", 0.0, "  0%|          | 0/100 [00:00<?, ?it/s]")
    for t in range(5):  # rank 1 never says the total; it is the slow one
        board.feed("1", float(t), f"[rank 1] step {t} loss=1.0")
    board.feed("0", 4.0, " 40%|████      | 40/100 [00:04<00:06, 10.00it/s]")
    assert board.ranks["1"].rate() == pytest.approx(1.0)
    assert board.eta(4.0) == pytest.approx(96.0)


def test_eta_unknown_without_total_or_rate_and_none_when_a_rank_stalls() -> None:
    board = ProgressBoard()
    assert board.eta(0.0) is None
    feed_steps(board, "0", 0.0, 10.0, 5, total=0)
    board.ranks["0"].total = None
    assert board.eta(5.0) is None  # no total
    board = ProgressBoard()
    board.feed("0", 0.0, "step 10/100 loss=1")
    assert board.eta(1.0) is None  # one sample: no rate
    board.feed("0", 10.0, "step 100/100 loss=1")
    assert board.eta(11.0) == 0.0  # done
    board.feed("1", 0.0, "step 10/100 loss=1")
    board.feed("1", 10.0, "step 10/100 loss=1")
    assert board.eta(11.0) is None  # rank 1 is not moving


def test_summary_for_json() -> None:
    import json

    board = ProgressBoard()
    assert not board.feed("trainer-worker-0", 1.0, "NCCL INFO ring 0")
    assert board.feed("trainer-worker-0", 1.0, "[rank 0] step 42 loss=2.4871 lr=3.0e-04 throughput=15.2 samples/s")
    assert board.feed("trainer-worker-0", 3.0, "[rank 0] step 46 loss=2.4 lr=3.0e-04 throughput=15.0 samples/s")
    assert board.summary() == {"trainer-worker-0": {"step": 46, "loss": 2.4, "throughput": 15.0,
                                                    "unit": "samples/s", "rate": 2.0}}
    json.dumps(board.summary())


def test_the_dashboard_reads_a_batchs_newest_lines_of_each_rank_in_order() -> None:
    from monitors.dataloop import newest_per_rank
    from monitors.logs.lines import LogLine, Origin

    def line(label: str, n: int) -> LogLine:
        return LogLine(n, f"step {n}".encode(), Origin(label, 0, "worker", 0, "ns", f"pod-{label}", "main", None))

    batch = [line("b" if i % 3 == 0 else "a", i) for i in range(1, 30)]  # b: 3, 6, ..., 27; a: the rest
    kept = [(ln.label, ln.ts) for ln in newest_per_rank(batch, 4)]
    assert kept == [("b", 18), ("b", 21), ("b", 24), ("a", 25), ("a", 26), ("b", 27), ("a", 28), ("a", 29)]
    assert newest_per_rank(batch[:3], 4) == batch[:3]
