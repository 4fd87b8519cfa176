"""No internal error from outside input (issue #25, item 6): every parser of what comes from outside
ranks, fuzzed with hypothesis (as `test_fuzz_parsers.py` does for the record parsers): wrong types,
huge numbers, control characters, truncated data. Each either returns what it declares or raises
the one exception its callers turn into a one-line error with its exit code:

- kubeconfigs (`load_cluster_config`: a `ClusterConfig` whose headers can be sent, or
  `ConnectionProblem` with exit 3; its TLS files loaded or `ConnectionProblem` exit 5);
- ranks' own configuration file and themes (`SettingsError` / `ConfigReadError` / `ThemeError`);
- the API server's answers outside the record parsers: Status bodies, objects (`BadAnswer`),
  discovery documents (a client whose wire is scripted), exec's status frame;
- Prometheus' answers (`PromError`) and their vectors and matrices, the DCGM exporters' text;
- flight recordings and session histories on disk (ValueError for a document that is not one;
  what is read is shown by `ranks get` and `logs --first-failure` without error);
- log lines: training progress (counts within 64 bits: JSON output holds them), CRI records,
  the launcher's rank tags; and what sanitising leaves for a terminal (no control, separator or
  bidi control) in text, JSON and YAML.

Derandomised (a fixed seed, no example database).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from monitors.connection import ClusterConfig, ConnectionProblem, ExitCode, load_cluster_config

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
FEW = settings(FUZZ, max_examples=60)

NASTY: list[Any] = [
    None, True, False, 0, -1, 2**63 - 1, 2**64, -(2**63) - 1, 10**30, 1e308, -1e308, float("inf"), float("nan"),
    "", "x", "\x1b]0;t\x07", "a\r\nb", "\u202e", "\u2028", "\x00", "9" * 5000, "1e400", "-1", [], [1, "a"], {},
    {"a": [None]}, "https://", "http://[::1", "\ud7ff",
]
scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=10)
wrong = st.one_of(st.sampled_from(NASTY), values)
def jdump(value: Any) -> bytes:
    """JSON as a server or a file may hold it: integers beyond 64 bits, NaN and Infinity included."""
    return json.dumps(value).encode()


UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON-like document (dict keys, list indices)."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += paths(v, (*prefix, i))
    return out


def replaced(doc: Any, where: tuple[Any, ...], value: Any) -> Any:
    if not where:
        return value
    import copy

    out = copy.deepcopy(doc)
    node = out
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    return out


@st.composite
def mutated(draw: st.DrawFn, base: Any, n: int = 3) -> Any:
    """`base` with up to `n` places replaced by wrong values (or deleted)."""
    doc = base
    for _ in range(draw(st.integers(1, n))):
        where = draw(st.sampled_from(paths(doc)))
        if where and draw(st.booleans()) and isinstance(doc, dict):
            parent = doc
            with contextlib.suppress(Exception):
                for k in where[:-1]:
                    parent = parent[k]
                if isinstance(parent, dict):
                    doc = replaced(doc, where, None)
                    continue
        doc = replaced(doc, where, draw(wrong))
    return doc


# -- kubeconfigs ---------------------------------------------------------------------------------------

KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "here",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True,
                                           "tls-server-name": "kubernetes.default"}}],
    "users": [{"name": "u", "user": {"token": "t0ken-abc"}}],
    "contexts": [{"name": "here", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}}],
}


def loaded(path: Path, context: str | None = None) -> ClusterConfig | ConnectionProblem:
    try:
        cfg = load_cluster_config(str(path), context, exec_timeout=5)
    except ConnectionProblem as exc:
        assert exc.code == ExitCode.NO_CONFIG, exc.message
        assert "\n" not in exc.message and "t0ken" not in exc.message, exc.message
        return exc
    return cfg


def usable(cfg: ClusterConfig) -> None:
    """What the first request does with it: headers, the server URL, TLS."""
    from monitors.kube import KubeClient

    headers = cfg.headers()
    assert all(isinstance(k, str) and isinstance(v, str) and not UNSAFE.search(v) for k, v in headers.items())
    assert cfg.server.startswith(("https://", "http://")), cfg.server
    assert cfg.tls_server_name is None or isinstance(cfg.tls_server_name, str)

    async def session() -> None:
        client = KubeClient(cfg)
        try:
            client.session()
        except ConnectionProblem as exc:
            assert exc.code == ExitCode.TLS
        finally:
            await client.close()

    asyncio.run(session())


@FUZZ
@given(doc=mutated(KUBECONFIG, 4))
def test_a_kubeconfig_loads_or_is_exit_3(tmp_path_factory: pytest.TempPathFactory, doc: Any) -> None:
    path = tmp_path_factory.mktemp("kc") / "config"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    got = loaded(path)
    if isinstance(got, ClusterConfig):
        usable(got)


@FEW
@given(raw=st.one_of(st.binary(max_size=300), st.sampled_from([
    b"", b"\x00\x01", b"clusters: [", b"- a\n- b\n", b"!!python/object:os.system {}", b"a: &x [*x]",
    yaml.safe_dump(KUBECONFIG).encode()[:120], b"\xef\xbb\xbf" + yaml.safe_dump(KUBECONFIG).encode(),
])))
def test_kubeconfig_bytes_that_are_no_yaml_are_exit_3(tmp_path_factory: pytest.TempPathFactory, raw: bytes) -> None:
    path = tmp_path_factory.mktemp("kc") / "config"
    path.write_bytes(raw)
    got = loaded(path)
    if isinstance(got, ClusterConfig):
        usable(got)


# -- ranks' configuration file and themes -----------------------------------------------------------------


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # (\uXXXX escapes: a TOML basic string)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v if x is not None) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(x)}" for k, x in v.items() if x is not None) + "}"
    return '""'


SETTING_KEYS = ["prometheus_url", "refresh_interval", "theme", "colours", "ascii", "default_project",
                "hang_after_minutes", "idle_threshold_percent", "progress_patterns", "read_only", "namespaces",
                "coalesce", "keymap", "metrics", "nonsense"]


@FUZZ
@given(items=st.dictionaries(st.sampled_from(SETTING_KEYS), wrong.filter(lambda v: v is not None), max_size=5),
       garbage=st.sampled_from(["", "\n[[[", "\x00", "theme = \"dark", "\n[keymap]\nquit = 5\n",
                                "\n[metrics]\nutil = \"a b\"\n"]))
def test_the_configuration_file_is_read_or_refused_in_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                                items: dict[str, Any], garbage: str) -> None:
    from tui.config_file import ConfigReadError, read_only_setting
    from tui.settings import SettingsError, load_settings

    path = tmp_path_factory.mktemp("cfg") / "config.toml"
    path.write_text("".join(f"{k} = {toml_value(v)}\n" for k, v in items.items()) + garbage)
    try:
        s = load_settings(path)
    except SettingsError as exc:
        assert str(exc).strip(), exc
    else:
        assert 1 <= s.refresh_interval <= 3600 and 0 < s.idle_threshold_percent <= 100
    try:
        read_only_setting({"RANKS_CONFIG": str(path)})
    except ConfigReadError as exc:
        assert "\n" not in str(exc).strip()


@FEW
@given(items=st.dictionaries(st.sampled_from(["name", "dark", "colors", "base", "accent", "glyphs", "x"]),
                             wrong.filter(lambda v: v is not None), max_size=4))
def test_a_theme_file_is_read_or_refused(tmp_path_factory: pytest.TempPathFactory, items: dict[str, Any]) -> None:
    from themes.loader import ConfigFileError, load_theme_file

    path = tmp_path_factory.mktemp("theme") / "mine.toml"
    path.write_text("".join(f"{k} = {toml_value(v)}\n" for k, v in items.items()))
    with contextlib.suppress(ConfigFileError):
        load_theme_file(path)


# -- the API server's answers ------------------------------------------------------------------------------


@FUZZ
@given(status=st.integers(100, 999), body=st.one_of(st.binary(max_size=200), values.map(jdump)),
       retry=st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["1e400", "nan", "-5", "99999999999"])))
def test_an_error_answer_is_one_line_with_its_exit_code(status: int, body: bytes, retry: str | None) -> None:
    from monitors.kube import problem_from_body

    p = problem_from_body(status, body, {"Retry-After": retry} if retry is not None else {})
    assert isinstance(p.message, str) and isinstance(p.reason, str)
    assert p.retry_after is None or 0 <= p.retry_after <= 60
    assert isinstance(p.exit_code, ExitCode)
    line = p.one_line()
    assert isinstance(line, str)


@FUZZ
@given(body=st.one_of(st.binary(max_size=200), values.map(jdump)))
def test_an_answer_is_an_object_or_a_bad_answer(body: bytes) -> None:
    from monitors.kube import BadAnswer, parse_object

    try:
        doc = parse_object(body, "GET /x", "https://k")
    except BadAnswer as exc:
        assert exc.code == ExitCode.ERROR and "\n" not in exc.message
    else:
        assert isinstance(doc, dict)


DISCOVERY = {
    "kind": "APIGroupDiscoveryList", "items": [
        {"metadata": {"name": "kubeflow.org"}, "versions": [
            {"version": "v1", "resources": [{"resource": "pytorchjobs", "scope": "Namespaced"}]}]}]}
LEGACY_GROUPS = {"kind": "APIGroupList", "groups": [
    {"name": "kubeflow.org", "versions": [{"version": "v1"}], "preferredVersion": {"version": "v1"}}]}
LEGACY_RESOURCES = {"kind": "APIResourceList", "resources": [{"name": "pytorchjobs", "namespaced": True},
                                                              {"name": "pytorchjobs/status", "namespaced": True}]}


class ScriptedWire:
    """`KubeClient`'s two requests, answered from a script (the wire stands in; the parsing is ours)."""

    def __init__(self, answers: dict[str, tuple[str, bytes]]) -> None:
        self.answers = answers

    async def request(self, method: str, path: str, **_: Any) -> tuple[str, bytes]:
        return self.answers.get(path, ("application/json", b'{"kind": "Status"}'))


@FUZZ
@given(aggregated=st.booleans(), core=mutated(DISCOVERY, 3), apis=mutated(DISCOVERY, 3),
       groups=mutated(LEGACY_GROUPS, 3), resources=mutated(LEGACY_RESOURCES, 3))
def test_discovery_documents_of_any_shape(aggregated: bool, core: Any, apis: Any, groups: Any, resources: Any) -> None:
    from monitors.connection import ClusterConfig
    from monitors.kube import AGGREGATED, BadAnswer, Kind, KubeClient

    agg = AGGREGATED.split(",")[0]
    if aggregated:
        script = {"/api": (agg, jdump(core)), "/apis": (agg, jdump(apis))}
    else:
        script = {"/api": ("application/json", jdump({"versions": ["v1"]})),
                  "/apis": ("application/json", jdump(groups)),
                  "/api/v1": ("application/json", jdump(resources)),
                  "/apis/kubeflow.org/v1": ("application/json", jdump(resources))}
    wire = ScriptedWire(script)

    class Client(KubeClient):
        async def _request(self, method: str, path: str, **kw: Any) -> tuple[str, bytes]:  # type: ignore[override]
            return await wire.request(method, path, **kw)

    async def go() -> None:
        client = Client(ClusterConfig(server="https://k", context="c", namespace="n", user="u"))
        try:
            kinds = await client.served_kinds()
        except BadAnswer:
            return
        for (group, plural), kind in kinds.items():
            assert isinstance(kind, Kind) and isinstance(group, str) and isinstance(plural, str) and plural
            assert isinstance(kind.version, str) and kind.version

    asyncio.run(go())


@FUZZ
@given(status=mutated({"kind": "Status", "status": "Failure", "reason": "NonZeroExitCode", "details": {
    "causes": [{"reason": "ExitCode", "message": "3"}]}, "message": "command terminated with non-zero exit code"}, 3))
def test_an_exec_status_frame_of_any_shape_is_an_exit_code(status: Any) -> None:
    from sessions.exec_bridge import exit_code_of

    code, message = exit_code_of(status)
    assert isinstance(code, int) and 0 <= code <= 255 and isinstance(message, str)


# -- Prometheus and the exporters ---------------------------------------------------------------------------

VECTOR = {"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"namespace": "team-a", "pod": "job-worker-0", "Hostname": "node-1", "gpu": "0"},
     "value": [1_800_000_000.5, "85"]}]}}
MATRIX = {"status": "success", "data": {"resultType": "matrix", "result": [
    {"metric": {"exported_namespace": "team-a", "exported_pod": "job-worker-0"},
     "values": [[1_800_000_000, "85"], [1_800_000_015, "NaN"]]}]}}


@FUZZ
@given(status=st.sampled_from([200, 400, 422, 500, 503]),
       doc=st.one_of(mutated(VECTOR, 4), mutated(MATRIX, 4), st.binary(max_size=80)))
@example(status=200, doc={"status": "success", "data": {"resultType": "vector", "result": [None, 5, "x"]}})
@example(status=200, doc={"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": ["namespace", "pod"], "value": [1, "5"]}, {"metric": {"namespace": 5, "pod": ["p"]}, "value": [1, "5"]}]}})
@example(status=200, doc={"status": "success", "data": {"resultType": "matrix", "result": [
    {"metric": {"namespace": "a", "pod": "p"}, "values": [["1e400", "5"], [1, "5"]]}, {"metric": {}, "values": 7}]}})
def test_a_prometheus_answer_of_any_shape(status: int, doc: Any) -> None:
    from monitors import promql
    from monitors.promql import PromError

    body = doc if isinstance(doc, bytes) else jdump(doc)
    try:
        answer = promql.parse_response(status, body)
    except PromError as exc:
        assert exc.kind in ("unavailable", "query") and "\n" not in str(exc)
        return
    for key in (promql.pod_key, promql.node_key):
        for reading in promql.parse_vector(answer.result, key, promql.FIELDS[0]).values():
            assert reading.value is None or math.isfinite(reading.value)
        for points in promql.parse_matrix(answer.result, key, promql.HISTORY_FIELD).values():
            assert all(math.isfinite(t) and math.isfinite(v) for t, v in points)


@FUZZ
@given(lines=st.lists(st.one_of(
    st.sampled_from([
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n1",namespace="a",pod="p"} 85',
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",pod="p",namespace="a"} 4294967295', "# TYPE x gauge", "# HELP x \\",
        'x{a="\\"} 1', 'x{a="b"} 1e400', "x 1 99999999999999999999999", 'x{a="b",} NaN', "x{", "x{a=b} 1",
        'DCGM_FI_DEV_FB_USED{gpu="0",pod="\x1b]0;t\x07",namespace="\u202e"} 12', "\x00\xff", "x -Inf 1",
    ]),
    st.text(max_size=60)), max_size=12))
def test_an_exporters_text_of_any_shape(lines: list[str]) -> None:
    from monitors import exposition, promql

    exp = exposition.parse("\n".join(lines).encode("utf-8", "surrogatepass"))
    names = promql.metric_names()
    for key in (promql.pod_key, promql.node_key):
        for fields in promql.aggregate_samples(exp.samples, names, key).values():
            for reading in fields.values():
                assert reading.value is None or math.isfinite(reading.value)


# -- what ranks keeps on disk -------------------------------------------------------------------------------

RECORDING = {"namespace": "team-a", "kind": "PyTorchJob", "name": "job", "uid": "u1", "recorded_at": 1_800_000_001.0,
             "failures": [{"label": "worker-0", "role": "worker", "rank": 1, "pod": "job-worker-0", "node": "n1",
                           "container": "pytorch", "exit_code": 3, "reason": "Error", "finished_at": 1_800_000_000.0,
                           "message": "boom", "lines": ["Traceback", "RuntimeError: boom"],
                           "recorded_at": 1_800_000_001.0, "source": "log"}]}


@FUZZ
@given(doc=st.one_of(mutated(RECORDING, 4), values))
def test_a_flight_recording_of_any_shape(doc: Any) -> None:
    """The issue's cases among them: a list where an object belongs, a huge timestamp."""
    from monitors.flight_recorder import Recording
    from tui.cli.printers import print_failure

    try:
        rec = Recording.from_json(doc)
    except ValueError:
        return
    orjson.dumps(rec.to_dict())
    first = rec.first()
    if first is not None:
        orjson.dumps(first.to_json())
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            print_failure(first, 1_800_000_100.0)
        assert not UNSAFE.search(out.getvalue().replace("\n", " "))


def test_the_issues_recordings() -> None:
    from monitors.flight_recorder import Recording

    with pytest.raises(ValueError):
        Recording.from_json([RECORDING])
    rec = Recording.from_json({**RECORDING, "failures": [[1, 2], {**RECORDING["failures"][0], "finished_at": 1e300,
                                                                   "recorded_at": 10**30, "exit_code": 2**70}]})
    (f,) = rec.failures
    assert f.finished_at is None and f.recorded_at is None and f.exit_code == -1 and f.label == "worker-0"


SESSION = {"sessions": [{"namespace": "team-a", "kind": "PyTorchJob", "name": "s", "uid": "u", "saved_at": 1.5e9,
                         "job": {"kind": "PyTorchJob"}, "debug_of": None,
                         "histories": [{"label": "master-0", "pod": "s-master-0", "instance": "s-master-0@1",
                                        "text": "#1 0 torchrun train.py\n", "read_at": 1.5e9}],
                         "runs": [{"launcher": "torchrun", "command": "torchrun train.py", "status": 0,
                                   "start": 1.5e9, "end": 1.5e9 + 5, "line": "torchrun train.py",
                                   "label": "master-0", "pod": "s-master-0", "source": "shell"}]}]}


@FUZZ
@given(doc=st.one_of(mutated(SESSION, 4), values))
def test_a_session_history_file_of_any_shape(tmp_path_factory: pytest.TempPathFactory, doc: Any) -> None:
    from sessions.history_store import HistoryStore

    root = tmp_path_factory.mktemp("st") / "ranks" / "sessions"
    store = HistoryStore("ctx", "https://k", root=root)
    path = store.path("team-a", "PyTorchJob", "s")
    from monitors.state_dir import write_private

    write_private(path, jdump(doc))
    for s in [*store._read("team-a", "PyTorchJob", "s"), *store.find("*", "s")]:
        orjson.dumps(s.to_dict())
        for h in s.histories:
            assert isinstance(h.text, str) and isinstance(h.label, str)
        for r in s.runs:
            assert r.status is None or isinstance(r.status, int)
            assert r.start is None or math.isfinite(r.start)
    store.save_history("team-a", "PyTorchJob", "s", "u", "master-0", "s-master-0", "i", "#2 0 echo\n")


# -- log lines ---------------------------------------------------------------------------------------------

big_numbers = st.one_of(st.integers(0, 2**80).map(str), st.sampled_from(["9" * 30, "1e400", "1e30", "-5", "nan"]))


@FUZZ
@given(n=big_numbers, total=big_numbers, loss=big_numbers, template=st.sampled_from([
    "step {n} loss {loss}", "step {n}/{total} loss={loss} 12.5 samples/s", "{{'step': {n}, 'loss': {loss}}}",
    '{{"global_step": {n}, "max_steps": {total}, "loss": {loss}}}', "Epoch 1: 45%|###| {n}/{total} [00:01<00:01, 1it/s]",
    "{n}/{total} [====>...] - ETA: 1:02 - loss: {loss}", "Train Epoch: 1 [{n}/{total} (2%)] Loss: {loss}",
    "iteration {n}/{total} | lm loss {loss} | tokens_per_sec={loss}",
]))
def test_progress_from_any_numbers_fits_json(n: str, total: str, loss: str, template: str) -> None:
    """The issue's case among them: a step beyond 64 bits (`ranks get -o json` crashed)."""
    from monitors.diagnostics.progress import ProgressBoard

    board = ProgressBoard()
    for i, label in enumerate(("worker-0", "worker-1")):
        board.feed(label, 1_800_000_000.0 + i, template.format(n=n, total=total, loss=loss))
        board.feed(label, 1_800_000_010.0 + i, template.format(n=n, total=total, loss=loss))
    summary = board.summary()
    orjson.dumps(summary)  # (an int beyond 64 bits raises here)
    for r in board.ranks.values():
        assert r.step is None or 0 <= r.step < 2**63
        assert r.total is None or 0 <= r.total < 2**63
    eta = board.eta(1_800_000_020.0)
    assert eta is None or (math.isfinite(eta) and eta >= 0)


@FUZZ
@given(raw=st.binary(max_size=200))
def test_a_log_record_of_any_bytes(raw: bytes) -> None:
    from monitors.logs.lines import split_record
    from monitors.logs.rank_tags import rank_tag
    from monitors.logs.terminal_text import sanitize_line

    ts, content = split_record(raw)
    assert ts is None or 0 <= ts < 2**64
    tag = rank_tag(content)
    assert tag is None or (isinstance(tag[0], int) and 0 <= tag[0] < 2**63)
    safe = sanitize_line(content)
    assert not UNSAFE.search(safe.text), safe.text


@FUZZ
@given(text=st.text(max_size=80), extra=st.sampled_from(["\u2028", "\u2029", "\x85", "\u202e", "\x1b[2J", "\x9b1m",
                                                           "\u2066", "\x00", "\r\n"]))
def test_text_json_and_yaml_carry_nothing_a_terminal_acts_on(text: str, extra: str) -> None:
    from monitors.sanitize import clean, json_safe, yaml_dump

    s = text + extra + text
    assert not UNSAFE.search(clean(s)), clean(s)
    assert not UNSAFE.search(clean(s, single_line=False).replace("\n", "")), clean(s, single_line=False)
    doc = {"name": s, s: [s, 1], "n": 2**70 if False else 7}
    out = json_safe(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
    assert not UNSAFE.search(out.replace("\n", "")), out
    assert json.loads(out) == doc  # (escaped: the same data read back)
    out = yaml_dump(doc, sort_keys=False)
    assert not UNSAFE.search(out.replace("\n", "")), out
    assume("\ufeff" not in s)
    assert yaml.safe_load(out) == doc
