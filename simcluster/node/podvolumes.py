"""Pod volumes materialised as plain files under the pod's root directory.

- `configMap`, `secret`, `downwardAPI` and `projected` (of those three, plus
  `serviceAccountToken`) volumes are written as files with the items' `path`s and modes
  (`mode`, else `defaultMode`, else 0644); without `items` every key becomes a file.
- `emptyDir` is an empty directory; any other volume type (hostPath, PVCs, CSI...) is an empty
  directory too: nothing of the host is exposed.
- A volume's files live at the first mountPath (without subPath) that mounts it; further mounts
  of the same volume (another container, another path, a `subPath`) are symlinks to it, so all
  containers of the pod share one copy. Mount paths are per pod here, not per container.
- Files are written once, when the pod starts (the real kubelet also refreshes ConfigMap and
  Secret volumes later; simcluster does not).
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .podenv import (
    ContainerConfigError,
    Lookup,
    dict_items,
    field_value,
    in_pod_path,
    referenced,
    resource_value,
)

DEFAULT_MODE = 0o644


def _decode(v: Any) -> bytes:
    try:
        return base64.b64decode(v)
    except (ValueError, TypeError):
        return b""


def _source_files(obj: Mapping[str, Any], secret: bool) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    if secret:
        for k, v in (obj.get("data") or {}).items():
            files[k] = _decode(v)
        for k, v in (obj.get("stringData") or {}).items():
            files[k] = str(v).encode()
    else:
        for k, v in (obj.get("data") or {}).items():
            files[k] = str(v).encode()
        for k, v in (obj.get("binaryData") or {}).items():
            files[k] = _decode(v)
    return files


def _select(files: dict[str, bytes], items: Any, default_mode: int, what: str,
            optional: bool) -> list[tuple[str, bytes, int]]:
    if not items:
        return [(k, v, default_mode) for k, v in sorted(files.items())]
    out = []
    for it in dict_items(items):
        key = str(it.get("key") or "")
        if key not in files:
            if optional:
                continue
            raise ContainerConfigError(f"configmap references non-existent config key: {key}"
                                       if what == "configmap" else
                                       f"references non-existent secret key: {key}")
        mode = it.get("mode")
        out.append((str(it.get("path") or key), files[key], int(mode) if mode is not None else default_mode))
    return out


def _downward_files(pod: Mapping[str, Any], items: Any, default_mode: int,
                    allocatable: Mapping[str, Any]) -> list[tuple[str, bytes, int]]:
    out = []
    containers = {c.get("name"): c for c in dict_items((pod.get("spec") or {}).get("containers"))}
    for it in dict_items(items):
        mode = it.get("mode")
        mode = int(mode) if mode is not None else default_mode
        if it.get("fieldRef"):
            value = field_value(pod, str(it["fieldRef"].get("fieldPath", "")))
        elif it.get("resourceFieldRef"):
            ref = it["resourceFieldRef"]
            c = containers.get(ref.get("containerName")) or {}
            value = resource_value(c, str(ref.get("resource", "")), ref.get("divisor"), allocatable)
        else:
            continue
        out.append((str(it.get("path") or ""), value.encode(), mode))
    return out


def volume_files(
    pod: Mapping[str, Any], vol: Mapping[str, Any], lookup: Lookup, allocatable: Mapping[str, Any],
    token: str,
) -> list[tuple[str, bytes, int]] | None:
    """The (relative path, content, mode) files of a volume; None for a plain directory."""
    if vol.get("configMap") is not None or vol.get("secret") is not None:
        secret = vol.get("secret") is not None
        src = vol["secret"] if secret else vol["configMap"]
        name = str(src.get("secretName") if secret else src.get("name") or "")
        default_mode = src.get("defaultMode")
        default_mode = int(default_mode) if default_mode is not None else DEFAULT_MODE
        obj = referenced(lookup, secret, name, src.get("optional"))
        if obj is None:
            return []
        return _select(_source_files(obj, secret), src.get("items"), default_mode,
                       "secret" if secret else "configmap", bool(src.get("optional")))
    if vol.get("downwardAPI") is not None:
        src = vol["downwardAPI"]
        dm = src.get("defaultMode")
        return _downward_files(pod, src.get("items"), int(dm) if dm is not None else DEFAULT_MODE, allocatable)
    if vol.get("projected") is not None:
        src = vol["projected"]
        dm = src.get("defaultMode")
        default_mode = int(dm) if dm is not None else DEFAULT_MODE
        files: list[tuple[str, bytes, int]] = []
        for s in dict_items(src.get("sources")):
            if s.get("configMap") is not None or s.get("secret") is not None:
                secret = s.get("secret") is not None
                ref = s["secret"] if secret else s["configMap"]
                obj = referenced(lookup, secret, str(ref.get("name") or ""), ref.get("optional"))
                if obj is None:
                    continue
                files += _select(_source_files(obj, secret), ref.get("items"), default_mode,
                                 "secret" if secret else "configmap", bool(ref.get("optional")))
            elif s.get("downwardAPI") is not None:
                files += _downward_files(pod, s["downwardAPI"].get("items"), default_mode, allocatable)
            elif s.get("serviceAccountToken") is not None:
                path = str(s["serviceAccountToken"].get("path") or "token")
                files.append((path, token.encode(), default_mode))
        return files
    return None


def _write_files(target: Path, files: list[tuple[str, bytes, int]]) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for rel, data, mode in files:
        path = in_pod_path(target, rel)
        if path == target:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.chmod(path, mode & 0o7777)


def _clear(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)


def materialise(
    pod: Mapping[str, Any], root: Path, lookup: Lookup, allocatable: Mapping[str, Any], token: str = "",
) -> list[str]:
    """Write the pod's volumes under `root`; returns every mountPath (for path rewriting)."""
    spec = pod.get("spec") or {}
    volumes = {str(v["name"]): v for v in dict_items(spec.get("volumes")) if v.get("name")}
    mounts: list[dict[str, Any]] = []
    for c in [*dict_items(spec.get("initContainers")), *dict_items(spec.get("containers"))]:
        mounts += [m for m in dict_items(c.get("volumeMounts")) if isinstance(m.get("mountPath"), str)]
    homes: dict[str, Path] = {}
    for m in mounts:  # first plain mount of each volume holds its files
        name = str(m.get("name") or "")
        if name in homes or m.get("subPath") or name not in volumes:
            continue
        homes[name] = in_pod_path(root, str(m["mountPath"]))
    for name in volumes:
        homes.setdefault(name, root / ".simcluster" / "volumes" / name)
    for name, vol in volumes.items():
        home = homes[name]
        files = volume_files(pod, vol, lookup, allocatable, token)
        if home.is_symlink():
            home.unlink()
        home.mkdir(parents=True, exist_ok=True)
        if files:
            _write_files(home, files)
    paths: list[str] = []
    for m in mounts:
        name = str(m.get("name") or "")
        mount_path = str(m["mountPath"])
        paths.append(mount_path)
        if name not in homes:
            continue
        target = homes[name]
        sub = str(m.get("subPath") or "")
        if sub:
            target = in_pod_path(target, sub)
            if not target.exists():
                target.mkdir(parents=True, exist_ok=True)
        here = in_pod_path(root, mount_path)
        if here in (target, root):
            continue
        if here.is_symlink() and os.readlink(here) == str(target):
            continue
        here.parent.mkdir(parents=True, exist_ok=True)
        _clear(here)
        here.symlink_to(target)
    return paths
