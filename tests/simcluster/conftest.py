"""Fixtures of the simulator's tests: the official kubernetes client's APIs on simcluster (`k8s`)."""

from __future__ import annotations

import pytest


@pytest.fixture
def core(k8s):
    client, api = k8s
    return client.CoreV1Api(api)


@pytest.fixture
def custom(k8s):
    client, api = k8s
    return client.CustomObjectsApi(api)


@pytest.fixture
def batch(k8s):
    client, api = k8s
    return client.BatchV1Api(api)


@pytest.fixture
def nodes(simcluster):
    """Four GPU nodes of 8 GPUs each (the operators' tests)."""
    from .operator_kit import add_nodes

    add_nodes(simcluster)
