"""One way to build API paths (#26, item 5): `monitors.api_paths` escapes every name it puts in a
path and every selector value, and nothing else in monitors/, sessions/ or tui/ spells a path."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yarl

from monitors import api_paths
from monitors.api_paths import BadSegment
from monitors.kube import Kind
from monitors.monitor import workload_selector
from monitors.prom_discovery import ExporterPod, PromService
from sessions.lifecycle import Target
from sessions.manifests import FRAMEWORKS

ROOT = Path(__file__).resolve().parents[2]
BUILDER = ROOT / "monitors" / "api_paths.py"
API_TEXT = re.compile(r"^/apis?(/|$)|/apis?/|/namespaces/|/proxy(/|$)")
ESCAPERS = frozenset({"seg", "quote"})


def server_sees(path: str) -> str:
    """The path as the HTTP client sends it (yarl resolves dot segments, decodes what it may)."""
    return yarl.URL("https://api.example:6443" + path).raw_path


def test_every_name_is_one_segment() -> None:
    odd = "a/b?c#d%e f"
    assert api_paths.pod("team-a", odd, "log") == "/api/v1/namespaces/team-a/pods/a%2Fb%3Fc%23d%25e%20f/log"
    assert server_sees(api_paths.pod(odd, odd)).count("/") == 6  # the names did not add a segment
    assert api_paths.resource("kubeflow.org", "v1", "pytorchjobs", "team-a", "mnist") == \
        "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist"
    assert api_paths.namespace("../kube-system") == "/api/v1/namespaces/..%2Fkube-system"
    assert server_sees(api_paths.namespace("../kube-system")) == "/api/v1/namespaces/..%2Fkube-system"
    assert api_paths.node("gpu-0") == "/api/v1/nodes/gpu-0"
    assert api_paths.of_api_version("v1", "pods", "ns", "p") == "/api/v1/namespaces/ns/pods/p"
    assert api_paths.of_api_version("batch/v1", "jobs", "ns", "j") == "/apis/batch/v1/namespaces/ns/jobs/j"


@pytest.mark.parametrize("name", ["", ".", ".."])
def test_a_name_that_would_move_the_path_is_refused(name: str) -> None:
    # (the client resolves dot segments, escaped or not: /pods/%2E%2E/log would read /namespaces/x/log)
    assert server_sees("/api/v1/namespaces/x/pods/%2E%2E/log") == "/api/v1/namespaces/x/log"
    with pytest.raises(BadSegment):
        api_paths.pod("x", name, "log")
    assert api_paths.object_path("ConfigMap", "x", name) is None  # (an event's object: cluster-supplied)


def test_proxies() -> None:
    assert PromService("monitoring", "prometheus-k8s", "web", "https").path == \
        "/api/v1/namespaces/monitoring/services/https:prometheus-k8s:web/proxy"
    assert ExporterPod("gpu-operator", "dcgm/x", port=9400).path == \
        "/api/v1/namespaces/gpu-operator/pods/dcgm%2Fx:9400/proxy/metrics"
    assert api_paths.proxy("services", "m", "p", 9090, "api/v1/query") == \
        "/api/v1/namespaces/m/services/p:9090/proxy/api/v1/query"


def test_the_product_builds_its_paths_here() -> None:
    assert Kind("kubeflow.org", "v1", "pytorchjobs").path("a/b", "c?d") == \
        "/apis/kubeflow.org/v1/namespaces/a%2Fb/pytorchjobs/c%3Fd"
    assert Kind("", "v1", "nodes", namespaced=False).path("ignored", "n") == "/api/v1/nodes/n"
    assert Target("a/b", "PyTorchJob", "x#y", "kubeflow.org/v1").path == \
        "/apis/kubeflow.org/v1/namespaces/a%2Fb/pytorchjobs/x%23y"
    assert FRAMEWORKS["mpi"].path("a/b", "x") == "/apis/kubeflow.org/v2beta1/namespaces/a%2Fb/mpijobs/x"


def test_selector_values_cannot_change_the_selector() -> None:
    assert api_paths.field_selector({"spec.nodeName": "a,b=c\\d"}) == "spec.nodeName=a\\,b\\=c\\\\d"
    assert api_paths.field_selector({"metadata.name": "x", "status.phase": "Failed"}) == \
        "metadata.name=x,status.phase=Failed"
    assert api_paths.label_selector({"training.kubeflow.org/job-name": "mnist"}) == \
        "training.kubeflow.org/job-name=mnist"
    for bad in ("a,b", "a=b", "x!", "a b", "-a", "a" * 64):
        with pytest.raises(BadSegment):
            api_paths.label_selector({"job-name": bad})
    with pytest.raises(BadSegment):
        api_paths.label_selector({"a,b": "c"})
    assert workload_selector("PyTorchJob", "mnist") == "training.kubeflow.org/job-name=mnist"
    assert workload_selector("PyTorchJob", "x" * 100) == ""  # no pod can carry it: read pod by pod


def _escapes(node: ast.expr) -> bool:
    """A call of a URL escaper (`seg(...)`, `quote(...)`, `parse.quote(...)`; not `shlex.quote`)."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Name):
        return f.id in ESCAPERS
    return isinstance(f, ast.Attribute) and f.attr in ESCAPERS and ast.unparse(f.value) != "shlex"


def _spelled_paths(path: Path) -> list[str]:
    """Where `path` builds an API path itself: an f-string, `.format`, `%` or `+` around text that
    is a path's, or an escaper (`seg`, `quote`) called inside an f-string."""
    found = []
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        texts: list[str] = []
        if isinstance(node, ast.JoinedStr):
            texts = [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
            escapes = [v for v in node.values if isinstance(v, ast.FormattedValue) and _escapes(v.value)]
            if escapes:
                texts.append("/api/")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
                and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str):
            texts = [node.func.value.value]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
            sides = (node.left, node.right)
            consts = [s.value for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str)]
            texts = consts if len(consts) == 1 else []
        if any(API_TEXT.search(t) for t in texts):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)[:100]}")
    return found


def test_no_api_path_is_spelled_outside_the_builder() -> None:
    found = [hit for package in ("monitors", "sessions", "tui") for path in sorted((ROOT / package).rglob("*.py"))
             if path != BUILDER for hit in _spelled_paths(path)]
    assert found == [], "\n".join(found)


def test_the_check_sees_each_way_of_spelling_a_path(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('a = f"/api/v1/namespaces/{ns}/pods"\n'
                      'b = f"{base}/{seg(name)}"\n'
                      'c = "/apis/{g}/{v}".format(g=g, v=v)\n'
                      'd = "/api/v1/nodes/" + node\n'
                      'e = f"grant get on services/proxy in {ns}"\n'
                      'f = "/api/v1/pods"\n')
    found = [hit.split(":")[1] for hit in _spelled_paths(sample)]
    assert found == ["1", "2", "3", "4"], found
