"""Names typed by the user are checked and escaped before they reach a request (issue #11, item 5),
and `--request-timeout` reads kubectl's forms (item 10)."""

from __future__ import annotations

import pytest

from monitors.kube import Kind
from monitors.names import label_value, project_problem, workload_problem
from tui.cli.options import parse_request_timeout


def test_project_names_follow_the_namespace_rule() -> None:
    for ok in ("team-a", "runai-team-a", "a", "research", "x" * 63):
        assert project_problem(ok) is None, ok
    for bad, rule in [("default/pods", "lower-case letters, digits and '-'"), ("team-a?x=", "lower-case"),
                      ("team-a,x!=y", "lower-case"), ("Team-A", "lower-case"), ("-team", "starting and ending"),
                      ("", "cannot be empty"), ("x" * 64, "at most 63"), ("a b", "lower-case"),
                      ("te\x1bam", "lower-case")]:
        problem = project_problem(bad)
        assert problem is not None and rule in problem, (bad, problem)
        assert "\x1b" not in problem


def test_workload_names_and_kinds() -> None:
    for ok in ("mnist", "hvd-interactive", "pytorchjob/mnist", "PyTorchJob/mnist", "pytorchjob.kubeflow.org/mnist",
               "a.b-c"):
        assert workload_problem(ok) is None, ok
    for bad, rule in [("Foo_bar", "lower-case letters, digits, '-' and '.'"), ("a/b/c", "KIND"),
                      ("pytorchjob/", "empty"), ("x?y", "lower-case"), ("x" * 254, "at most 253"),
                      ("../etc", "KIND")]:
        problem = workload_problem(bad)
        assert problem is not None and rule in problem, (bad, problem)


def test_path_segments_and_selector_values_are_escaped_or_refused() -> None:
    pods = Kind("", "v1", "pods")
    assert pods.path("default/pods", "a?b#c") == "/api/v1/namespaces/default%2Fpods/pods/a%3Fb%23c"
    assert Kind("kubeflow.org", "v1", "pytorchjobs").path("team-a", "x%2F") == (
        "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/x%252F")
    assert label_value("team-a") == "team-a"
    for bad in ("team-a,x!=y", "a b", "a=b", "x" * 64):
        with pytest.raises(ValueError):
            label_value(bad)


def test_request_timeout_reads_kubectl_durations() -> None:
    assert parse_request_timeout("30s") == 30
    assert parse_request_timeout("1m") == 60
    assert parse_request_timeout("1m30s") == 90
    assert parse_request_timeout("500ms") == 0.5
    assert parse_request_timeout("45") == 45  # a bare number is seconds, as kubectl takes it
    assert parse_request_timeout("0") == 0  # no timeout
    for bad in ("abc", "", "10x", "-5s", "1m 30s"):
        with pytest.raises(ValueError, match="not a duration"):
            parse_request_timeout(bad)
