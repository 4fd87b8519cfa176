"""What a dashboard's one line says when GPU metrics are forbidden: the permission that is missing
and how it is granted (`monitors.prom_discovery.missing_permission`, from a discovery's notes)."""

from __future__ import annotations

from monitors.prom_discovery import PromService, missing_permission


def test_nothing_could_be_listed_names_both_ways_and_the_flag() -> None:
    notes = ["listing services in all namespaces: HTTP 403", "no Prometheus service found",
             "listing pods app=nvidia-dcgm-exporter in all namespaces: HTTP 403", "no DCGM exporter pod found"]
    assert missing_permission(notes) == (
        "HTTP 403: grant get on services, services/proxy in Prometheus' namespace or get, list on pods, "
        "pods/proxy in the DCGM exporters' (docs/ssh.md), or set --prometheus URL")


def test_a_prometheus_found_but_refused_through_the_proxy_names_that_permission() -> None:
    svc = PromService("monitoring", "prometheus-k8s", "9090")
    notes = ["monitoring/prometheus-k8s:9090: HTTP 403: services \"prometheus-k8s:9090\" is forbidden",
             "listing pods app=nvidia-dcgm-exporter in all namespaces: HTTP 403"]
    assert missing_permission(notes, [svc]) == (
        "HTTP 403 from Prometheus monitoring/prometheus-k8s:9090 through the API server: grant get on "
        "services/proxy in monitoring (docs/ssh.md), or set --prometheus URL")


def test_nothing_refused_says_nothing() -> None:
    assert missing_permission(["no Prometheus service found", "no DCGM exporter pod found"]) == ""
