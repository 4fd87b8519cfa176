"""A refused client waits for its backoff or for new credentials, whichever comes first
(`KubeClient.pause(..., until_credentials=True)`): a kubeconfig or token file rewritten while it
waits wakes it at once. The waits here are ten minutes long, so only the rewrite can end them
within the test's limit."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import yaml

from monitors.connection import load_cluster_config
from monitors.kube import KubeClient

LONG = 600.0  # the backoff the client would otherwise sit out
LIMIT = 60.0  # the test's own patience: far below LONG


def kubeconfig(tmp_path: Path, user: dict[str, str]) -> Path:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "here",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "here", "context": {"cluster": "c", "user": "u"}}]}))
    return path


async def paused_until(client: KubeClient, rewrite: Callable[[], object]) -> None:
    waiting = asyncio.create_task(client.pause(LONG, until_credentials=True))
    await asyncio.sleep(0.6)  # (past the first of its twice-a-second checks)
    assert not waiting.done()
    rewrite()
    await asyncio.wait_for(waiting, LIMIT)


async def test_a_rewritten_token_file_wakes_a_refused_client(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old\n")
    client = KubeClient(load_cluster_config(str(kubeconfig(tmp_path, {"tokenFile": str(token)})), None))
    await paused_until(client, lambda: token.write_text("a-new-token\n"))


async def test_a_rewritten_kubeconfig_wakes_a_refused_client(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, {"token": "old"})
    client = KubeClient(load_cluster_config(str(path), None))
    await paused_until(client, lambda: kubeconfig(tmp_path, {"token": "a-new-token"}))


async def test_without_until_credentials_a_rewrite_does_not_end_the_wait(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old\n")
    client = KubeClient(load_cluster_config(str(kubeconfig(tmp_path, {"tokenFile": str(token)})), None))
    waiting = asyncio.create_task(client.pause(LONG))
    token.write_text("a-new-token\n")
    await asyncio.sleep(1.5)  # (three of the checks a credentials wait would make)
    assert not waiting.done()
    waiting.cancel()
