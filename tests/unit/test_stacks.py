"""The hang autopsy's pure parts: py-spy's dumps parsed (JSON and text, hostile input), which process
is which rank, the prefix tree and its groups, the text and JSON it is shown as."""

from __future__ import annotations

import orjson
import pytest

from sessions.stacks.collect import Autopsy, RankStack, Unread
from sessions.stacks.dumps import DumpError, Frame, ThreadStack, chosen, parse_json, parse_text
from sessions.stacks.procs import Listing, Proc, classify, parse_listing, pod_processes
from sessions.stacks.render import PodInfo, text, to_json
from sessions.stacks.tree import groups, lines, merge, rank_ranges

TEXT_DUMP = """Process 3362: /usr/bin/python3 train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 3362 (idle): "MainThread"
    wait_for_peers (train.py:90)
    all_reduce (torch/distributed/distributed_c10d.py:2501)
    <module> (train.py:167)
Thread 0x7F00AB (active): "pin-memory"
    clock_nanosleep (libc.so.6)
    bg (train.py:6)
"""


def test_text_dump_parsed_outermost_first_threads_named():
    threads = parse_text(TEXT_DUMP)
    assert [t.thread for t in threads] == ["MainThread", "pin-memory"]
    main = threads[0]
    assert [f.name for f in main.frames] == ["<module>", "all_reduce", "wait_for_peers"]
    assert main.frames[1] == Frame("all_reduce", "torch/distributed/distributed_c10d.py", 2501)
    assert threads[1].active and threads[1].native_id == 0x7F00AB
    assert threads[1].frames[-1] == Frame("clock_nanosleep", "libc.so.6", None)
    assert chosen(threads, all_threads=False) == [main]
    assert chosen(threads, all_threads=True) == threads
    unnamed = parse_text(TEXT_DUMP.replace(': "MainThread"', ""))
    assert unnamed[0].thread == "thread 3362" and chosen(unnamed, False) == [unnamed[0]]
    assert chosen(unnamed[::-1], False, pid=3362)[0].thread == "MainThread"  # (its id is the process's)


def test_json_dump_parsed_and_bad_fields_left_out():
    raw = [{"thread_name": "MainThread", "os_thread_id": 7, "active": False, "frames": [
        {"name": "load_batch", "short_filename": "train.py", "line": 60},
        {"name": 5, "short_filename": "x.py", "line": 1},  # no name: left out
        {"name": "main", "filename": "/w/train.py", "line": "140"},  # a line no number: None
        {"name": "<module>", "short_filename": "train.py", "line": 167}]},
        "not a thread", {"thread_name": "x"}]
    (t,) = parse_json(orjson.dumps(raw))
    assert [(f.name, f.file, f.line) for f in t.frames] == [
        ("<module>", "train.py", 167), ("main", "/w/train.py", None), ("load_batch", "train.py", 60)]


@pytest.mark.parametrize("data", [b"", b"{", b'{"a": 1}', b"\x80\x81", b"cos\nsystem\n(S'echo hi'\ntR."])
def test_json_that_is_no_dump_is_an_error_never_evaluated(data: bytes):
    with pytest.raises(DumpError):
        parse_json(data)


def test_text_that_is_no_dump_is_an_error():
    with pytest.raises(DumpError):
        parse_text("Error: Permission Denied\n")
    assert parse_text("") == []


def test_escapes_in_names_and_paths_are_stripped():
    hostile = 'Thread 1 (idle): "Main\x1b]0;owned\x07Thread"\n    evil\x1b[2J\u202e (pa\x1b[0mth.py:3)\n'
    (t,) = parse_text(hostile)
    assert "\x1b" not in t.thread and t.thread == "MainThread"
    assert t.frames[0].name == "evil" and t.frames[0].file == "path.py"
    raw = [{"thread_name": "MainThread", "frames": [{"name": "f\x1b[31mx\u2066", "short_filename": "a\nb.py",
                                                      "line": 2}]}]
    (j,) = parse_json(orjson.dumps(raw))
    assert j.frames[0].name == "fx" and j.frames[0].file == "a b.py"


def test_rank_ranges():
    assert rank_ranges([*range(0, 17), *range(18, 64)]) == "[0-16,18-63]"
    assert rank_ranges([5]) == "[5]"
    assert rank_ranges([3, 1, 2, 9, 7]) == "[1-3,7,9]"
    assert rank_ranges([]) == "[]"


def _stack(*names: str) -> list[ThreadStack]:
    return [ThreadStack("MainThread", tuple(Frame(n, "train.py", i + 1) for i, n in enumerate(names)))]


def test_tree_merges_common_frames_and_puts_the_odd_rank_first():
    stacks = {r: _stack("<module>", "main", "all_reduce", "wait") for r in range(64) if r != 17}
    stacks[17] = _stack("<module>", "main", "load_batch", "read_shard")
    root = merge(stacks)
    shown = [(d, n.frame.name, rank_ranges(n.ranks), odd) for d, n, odd in lines(root)]
    assert shown == [
        (0, "<module>", "[0-63]", False), (1, "main", "[0-63]", False),
        (2, "load_batch", "[17]", True), (3, "read_shard", "[17]", True),  # the smaller branch first
        (2, "all_reduce", "[0-16,18-63]", False), (3, "wait", "[0-16,18-63]", False)]
    gs = groups(root)
    assert [g.ranks for g in gs] == [(17,), tuple(r for r in range(64) if r != 17)]
    assert gs[0].where == Frame("read_shard", "train.py", 4)
    assert [f.name for f in gs[1].frames] == ["<module>", "main", "all_reduce", "wait"]


def test_same_function_on_another_line_is_another_branch():
    a = [ThreadStack("MainThread", (Frame("main", "t.py", 10), Frame("step", "t.py", 20)))]
    b = [ThreadStack("MainThread", (Frame("main", "t.py", 11), Frame("step", "t.py", 20)))]
    assert [g.ranks for g in groups(merge({0: a, 1: a, 2: b}))] == [(2,), (0, 1)]


def test_all_threads_merge_per_thread_name():
    def two(inner: str) -> list[ThreadStack]:
        return [ThreadStack("MainThread", (Frame("main", "t.py", 1), Frame(inner, "t.py", 2))),
                ThreadStack("pin-memory", (Frame("run", "threading.py", 9),))]

    gs = groups(merge({0: two("wait"), 1: two("wait"), 2: two("load")}, all_threads=True))
    assert [(g.thread, g.ranks, g.where.name if g.where else "") for g in gs] == [
        ("MainThread", (2,), "load"), ("MainThread", (0, 1), "wait"), ("pin-memory", (0, 1, 2), "run")]


LISTING = """H job-worker-0
M mnt:[1]
P 1 0
N mnt:[1]
C python -S /usr/local/bin/torchrun --nproc-per-node 2 train.py
E RANK=0
E HOSTNAME=job-worker-0
P 10 1
N mnt:[1]
C /opt/venv/bin/python -u train.py
E RANK=4
E LOCAL_RANK=0
E HOSTNAME=job-worker-0
P 11 1
N mnt:[1]
C sh -c python -u train.py
E RANK=5
E LOCAL_RANK=1
E HOSTNAME=job-worker-0
P 12 11
N mnt:[1]
C python -u train.py
E RANK=5
E LOCAL_RANK=1
E HOSTNAME=job-worker-0
P 13 10
N mnt:[1]
C python -u train.py
E RANK=4
E LOCAL_RANK=0
E HOSTNAME=job-worker-0
P 20 0
N mnt:[1]
C /usr/sbin/sshd -D
P 30 0
N mnt:[2]
C python -u train.py
E RANK=9
P oops
E RANK=99
garbage line
"""


def test_which_process_is_which_rank():
    listing = parse_listing(LISTING)
    assert listing.hostname == "job-worker-0" and listing.mount_ns == "mnt:[1]"
    procs = pod_processes(listing)
    assert sorted(p.pid for p in procs) == [1, 10, 11, 12, 13, 20]  # another mount namespace: out
    found = classify(procs)
    assert [(r.rank, r.local_rank, r.pid) for r in found.ranks] == [(4, 0, 10), (5, 1, 12)]
    roles = {o.pid: (o.name, o.role) for o in found.others}
    assert roles == {1: ("python torchrun", "launcher"), 11: ("sh", "wrapper of rank 5"),
                     13: ("python train.py", "worker of rank 4"), 20: ("sshd", "not a rank")}


def test_mpi_and_horovod_variables_win_over_rank():
    p = Proc(5, 1, "python train.py", env={"RANK": "0", "OMPI_COMM_WORLD_RANK": "12", "HOROVOD_RANK": "3"})
    assert p.rank == 3
    p.env.pop("HOROVOD_RANK")
    assert p.rank == 12
    assert Proc(6, 1, "python x", env={"PMI_RANK": "7"}).rank == 7
    assert Proc(7, 1, "python x", env={"RANK": "-1; rm -rf /"}).rank is None


def test_one_namespace_shared_by_several_pods_is_told_apart_by_hostname():
    listing = Listing("a", "", [Proc(1, 0, "python t.py", env={"RANK": "0", "HOSTNAME": "a"}),
                                Proc(2, 0, "python t.py", env={"RANK": "1", "HOSTNAME": "b"})])
    assert [p.pid for p in pod_processes(listing)] == [1]


def _autopsy() -> Autopsy:
    a = Autopsy("gpt", "team", seconds=1.25, taken_at=1000.0)
    for r in range(16):
        inner = ("load_batch", "read_shard") if r == 7 else ("all_reduce", "wait_for_peers")
        a.stacks.append(RankStack(r, 0, f"gpt-worker-{r}", f"worker-{r}", 10 + r, "python train.py",
                                  _stack("<module>", "main", *inner)))
    a.unread.append(Unread("gpt-worker-16", "worker-16", "py-spy did not answer within 5s", 16))
    return a


def test_text_shows_fifteen_in_the_collective_and_one_apart():
    info = {"worker-7": PodInfo("rank 7 step 3 loss 1.2", 940.0, 0.0),
            **{f"worker-{r}": PodInfo("rank step 4", 950.0 + r, 2.0) for r in range(16) if r != 7}}
    out = text(_autopsy(), info, now=1000.0)
    assert "16 ranks read in 1.2s, 2 groups" in out
    assert "!   1 [7]" in out and "load_batch  train.py:3" in out
    assert "  15 [0-6,8-15]" in out
    group_lines = [line for line in out.splitlines() if "rank" in line and "last log" in line]
    assert group_lines[0].startswith("! 1 rank [7] in read_shard (train.py:4); last log 60s ago")
    assert "GPU 0%" in group_lines[0]
    assert group_lines[1].startswith("  15 ranks [0-6,8-15] in wait_for_peers")
    assert "last log 35s ago" in group_lines[1] and "GPU 2%" in group_lines[1]
    assert "Not read: rank 16 (worker-16): py-spy did not answer within 5s" in out


def test_json_has_groups_with_ranks_and_frames():
    data = to_json(_autopsy(), {}, now=1000.0)
    g0, g1 = data["groups"]
    assert g0["ranks"] == [7] and g0["odd"] and g0["frames"][-1] == {"name": "read_shard", "file": "train.py",
                                                                       "line": 4}
    assert g1["ranks"] == [r for r in range(16) if r != 7] and not g1["odd"]
    assert data["tree"][0]["count"] == 16 and data["unread"] == [
        {"pod": "worker-16", "rank": 16, "why": "py-spy did not answer within 5s"}]
    orjson.dumps(data)


def test_a_pods_dumps_are_split_by_their_marker_and_a_cut_one_is_named():
    from sessions.stacks.collect import split_sections, why_dump_failed

    m = "@@ranks-00ff"
    out = (f"{m} start 10\n[{{\"thread_name\": \"MainThread\", \"frames\": []}}]\n{m} end 10 0\n"
           f"{m} start 11\n@@ranks-other end 11 0\n{m} end 11 1\n"  # (a marker of another run is body)
           f"{m} start 12\n[{{\"thread").encode()
    s = split_sections(out, m)
    assert s.done[10][0] == 0 and s.done[10][1].startswith(b"[")
    assert s.done[11] == (1, b"@@ranks-other end 11 0")
    assert s.started == 12 and 12 not in s.done
    assert why_dump_failed(127, "sh: 1: py-spy: not found").startswith("py-spy is not in the image")
    assert "SYS_PTRACE" in why_dump_failed(1, "Error: Permission Denied (os error 13)\nmore")
    assert why_dump_failed(1, "Error: \x1b[31mboom") == "Error: boom"
