"""Where detect runs: OS, WSL, container, Colab, Kaggle, a Jupyter kernel, and the variables that matter.

Everything is read from files under ``root`` (a /proc-like root in tests) and from the environment mapping.
"""
from __future__ import annotations

import os
import sys

from cudamatrix.models import Context
from cudamatrix.safe.text import redact_urls

RELEVANT_VARS = ("LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME",
                 "CUDA_PATH", "CUDA_MODULE_LOADING", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS",
                 "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_INDEX", "UV_TORCH_BACKEND", "CONDA_PREFIX",
                 "CONDA_DEFAULT_ENV", "VIRTUAL_ENV", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
                 "NVIDIA_REQUIRE_CUDA", "XLA_FLAGS", "TF_FORCE_GPU_ALLOW_GROWTH", "PYTORCH_CUDA_ALLOC_CONF",
                 "WSL_DISTRO_NAME", "KUBERNETES_SERVICE_HOST", "BNB_CUDA_VERSION")


def _read(root: str, rel: str, limit: int = 65536) -> str:
    try:
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
            return fh.read(limit)
    except OSError:
        return ""


def container_kind(root: str, environ: dict[str, str]) -> str | None:
    """"kubernetes", "docker", "podman", "containerd", "lxc" or None."""
    if environ.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if os.path.exists(os.path.join(root, ".dockerenv")):
        return "docker"
    if os.path.exists(os.path.join(root, "run/.containerenv")):
        return "podman"
    cgroup = _read(root, "proc/1/cgroup")
    for marker, kind in (("kubepods", "kubernetes"), ("docker", "docker"), ("libpod", "podman"),
                         ("containerd", "containerd"), ("lxc", "lxc")):
        if marker in cgroup:
            return kind
    if environ.get("container"):
        return environ["container"]
    return None


def is_jupyter(root: str, environ: dict[str, str]) -> bool:
    """True inside a Jupyter kernel: ipykernel loaded here, JPY_ variables, or a kernel as parent process."""
    if "ipykernel" in sys.modules or any(k.startswith("JPY_") for k in environ):
        return True
    try:
        ppid = os.getppid()
    except OSError:
        return False
    cmdline = _read(root, f"proc/{ppid}/cmdline", 4096).replace("\0", " ")
    return "ipykernel" in cmdline or "jupyter" in cmdline


def probe(root: str, environ: dict[str, str], packages: dict[str, str] | None = None) -> Context:
    """The Context of this run."""
    ctx = Context()
    ctx.os = {"win32": "windows", "darwin": "darwin"}.get(sys.platform, "linux" if sys.platform.startswith("linux")
                                                         else sys.platform)
    release = _read(root, "proc/sys/kernel/osrelease", 512) + _read(root, "proc/version", 1024)
    ctx.wsl = ("microsoft" in release.lower() or bool(environ.get("WSL_DISTRO_NAME"))
               or os.path.isdir(os.path.join(root, "usr/lib/wsl/lib")))
    ctx.container = container_kind(root, environ)
    ctx.colab = any(k.startswith("COLAB_") for k in environ) or "google-colab" in (packages or {})
    ctx.kaggle = bool(environ.get("KAGGLE_KERNEL_RUN_TYPE")) or bool(environ.get("KAGGLE_URL_BASE"))
    ctx.jupyter = is_jupyter(root, environ)
    ctx.env = {k: _shown(k, environ[k]) for k in RELEVANT_VARS if k in environ}
    return ctx


def _shown(key: str, value: str) -> str:
    """An index variable's credentials masked as pip masks them: an Environment is printed and saved."""
    if "INDEX" in key or "FIND_LINKS" in key:
        return redact_urls(value)
    return value
