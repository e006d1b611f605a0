"""Node projects the client tests use, installed from their committed lock files into a cache.

`installed(name)` copies `tests/clients/NAME/` (package.json, package-lock.json and its
scripts) to `$XDG_CACHE_HOME/memhub-node/NAME-<hash of the lock>/` and runs `npm ci` there
once; later calls find `node_modules` and only refresh the scripts. Nothing lands in the
repository tree.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def node_tools() -> tuple[str, str] | None:
    """(node, npm) paths, or None when either is missing."""
    node, npm = shutil.which("node"), shutil.which("npm")
    return (node, npm) if node and npm else None


def no_node_at_all() -> bool:
    """Neither node nor npm is installed: the one case in which client tests skip."""
    return shutil.which("node") is None and shutil.which("npm") is None


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memhub-node"


def installed(name: str, timeout_s: float = 600) -> Path:
    """The cache directory holding `tests/clients/NAME` with its dependencies installed."""
    source = HERE / name
    lock = (source / "package-lock.json").read_bytes()
    digest = hashlib.sha256(lock + (source / "package.json").read_bytes()).hexdigest()[:16]
    target = cache_root() / f"{name}-{digest}"
    if not (target / "node_modules" / ".package-lock.json").exists():
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError(f"npm is needed to install tests/clients/{name} (it comes with Node.js)")
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=target.parent))
        try:
            for file in ("package.json", "package-lock.json"):
                shutil.copy2(source / file, staging / file)
            subprocess.run(
                [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=staging,
                check=True,
                timeout=timeout_s,
                stdout=subprocess.DEVNULL,
            )
            if not (target / "node_modules" / ".package-lock.json").exists():  # else: installed meanwhile
                if target.exists():  # a half-installed leftover
                    shutil.rmtree(target)
                staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    for script in source.glob("*.mjs"):
        if not (target / script.name).exists() or (target / script.name).read_bytes() != script.read_bytes():
            shutil.copy2(script, target / script.name)
    return target
