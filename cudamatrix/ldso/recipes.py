"""How each framework loads its CUDA libraries, played into a :class:`~cudamatrix.ldso.linkmap.LinkMap`: one recipe
per framework, read from the installed files where they say it; the rest is written down here.

- torch (torch/__init__.py ``_load_global_deps``, 2.x): ``ctypes.CDLL(torch/lib/libtorch_global_deps.so,
  RTLD_GLOBAL)``; if that fails, or (2.14) once it has mapped ``libcudart.so``, ``_preload_cuda_deps`` loads
  by full path the first match of each ``nvidia/<folder>/lib/<pattern>`` (and ``nvidia/cu<major>/lib``) found
  along sys.path — the list is read from the installed torch/__init__.py; then ``import torch._C``.
  ``libcaffe2_nvrtc.so`` (which needs libnvrtc) is dlopened by libtorch_cuda on first NVRTC use.
- tensorflow: ``_pywrap_tensorflow_internal.so``; on GPU start-up libtensorflow_framework.so.2 dlopens
  ``libcudart.so.<11.0|major>`` and ``libcudnn.so.<major>`` by name (XLA's dso_loader; its DT_RUNPATH names the
  nvidia wheel folders: data/loaders.json, read from tensorflow 2.15.1, 2.18.0 and 2.20.0).
- jax: jaxlib's extension, then each ``jax_plugins/*/*.so`` PJRT plugin, which dlopens ``libcudnn.so.<major>``
  by name on first use (its DT_RPATH names the nvidia wheel folders: data/loaders.json, jax-cuda12-pjrt 0.4.31
  and 0.10.2, jax-cuda13-pjrt 0.11.2).

What those libraries open in turn (cuDNN's sub-libraries) is :mod:`.openers`'s, applied by
:func:`cudamatrix.ldso.libpaths.predict_loads` after the recipe.
"""
from __future__ import annotations

import os
import re

from cudamatrix.ldso.paths import glob_one, matching, read_text
from cudamatrix.models import Framework
from cudamatrix.safe.text import lazy

_CUDA_LIBS_ENTRY = lazy(r'\(\s*"([\w-]+)",\s*"(lib[^"]+)"\s*\)|"([\w-]+)":\s*"(lib[^"]+)"')


def forget_listings() -> None:
    """Drop the folder listings of the last prediction (a later one may follow an install)."""
    _LISTED.clear()


def _torch(lm, site_packages: list[str], fw: Framework) -> bool:
    base = _first_dir(site_packages, "torch/lib/libtorch_global_deps.so")
    if base is None:
        return False
    torch_dir = os.path.join(base, "torch")
    init = read_text(os.path.join(torch_dir, "__init__.py"))
    cuda_major = (fw.cuda or "").split(".")[0]
    deps = lm.load(os.path.join(torch_dir, "lib", "libtorch_global_deps.so"), None, how="preload")
    if deps is None or ("_preload_cuda_deps(required=False)" in init and
                        any("libcudart.so" in o.real for o in lm.objects)):
        for folder, pattern in _cuda_libs(init):
            found = _torch_dep_path(site_packages, folder, pattern, cuda_major)
            if found and lm.load(found, None, how="preload") is None:
                break  # an OSError ends torch's best-effort loop
        if deps is None:
            lm.load(os.path.join(torch_dir, "lib", "libtorch_global_deps.so"), None, how="preload")
    ext = sorted(listed(torch_dir, "_C.*.so"))
    if ext:
        lm.load(ext[0], None, how="dlopen")
    nvrtc = os.path.join(torch_dir, "lib", "libcaffe2_nvrtc.so")
    caller = next((o for o in lm.objects if os.path.basename(o.real) == "libtorch_cuda.so"), None)
    if caller is not None and os.path.exists(nvrtc):
        lm.load(nvrtc, caller, how="dlopen", when="first use")
    return True


def _cuda_libs(init: str) -> list[tuple[str, str]]:
    """The (folder, pattern) list of torch's ``_preload_cuda_deps``, read from the installed source, plus nvtx."""
    start = init.find("def _preload_cuda_deps")
    body = init[start:init.find("\ndef ", start + 10)] if start >= 0 else ""
    pairs = [(a or c, b or d) for a, b, c, d in _CUDA_LIBS_ENTRY.findall(body)]
    if "_preload_cuda_lib(\"nvtx\"" in body:
        pairs.append(("nvtx", "libnvToolsExt.so.*[0-9]"))
    return pairs


def _torch_dep_path(site_packages: list[str], folder: str, pattern: str, cuda_major: str) -> str | None:
    """torch's ``_get_cuda_dep_paths`` along sys.path (the site-packages folders stand for it)."""
    for sp in site_packages:
        dirs = [os.path.join(sp, "nvidia", folder, "lib")]
        if cuda_major:
            dirs.append(os.path.join(sp, "nvidia", f"cu{cuda_major}", "lib"))
        dirs.append(os.path.join(sp, folder, "lib"))
        for d in dirs:  # glob.glob's answer: the directory's own order, names starting with "." left out
            names = matching(_listdir(d), pattern)
            if names:
                return os.path.join(d, names[0])
    return None


_LISTED: dict[str, list[str]] = {}


def _listdir(folder: str) -> list[str]:
    """The folder's names, read once per prediction (both simulations of every framework ask the same folders)."""
    names = _LISTED.get(folder)
    if names is None:
        try:
            names = os.listdir(folder)
        except OSError:
            names = []
        if len(_LISTED) >= 256:
            _LISTED.clear()
        _LISTED[folder] = names
    return names


def listed(folder: str, pattern: str, dirs: bool = False) -> list[str]:
    """``glob.glob(os.path.join(folder, pattern))`` for a pattern without a slash, from the remembered listing:
    the paths of the names that match, in the folder's order, names starting with "." left out (``dirs``: only
    folders, as glob keeps for a pattern that goes on below them)."""
    return glob_one(folder, pattern, dirs, names=_listdir(folder))


def _tensorflow(lm, site_packages: list[str], fw: Framework) -> bool:
    base = _first_dir(site_packages, "tensorflow/python/_pywrap_tensorflow_internal.so")
    if base is None:
        return False
    lm.load(os.path.join(base, "tensorflow/python/_pywrap_tensorflow_internal.so"), None, how="dlopen")
    caller = next((o for o in lm.objects if os.path.basename(o.real).startswith("libtensorflow_framework.so")), None)
    major = (fw.cuda or "").split(".")[0]
    names = []
    if major:
        names.append("libcudart.so.11.0" if major == "11" else f"libcudart.so.{major}")
    if fw.cudnn:
        names.append(f"libcudnn.so.{fw.cudnn.split('.')[0]}")
    for name in names:
        lm.load(name, caller, how="dlopen", when="first use")
    return True


def _jax(lm, site_packages: list[str], fw: Framework) -> bool:
    exts = []
    for sp in site_packages:
        exts += sorted(listed(os.path.join(sp, "jaxlib"), "xla_extension*.so") +
                       listed(os.path.join(sp, "jaxlib"), "_jax*.so"))
    if not exts:
        return False
    lm.load(exts[0], None, how="dlopen")
    for sp in site_packages:
        plugins = [p for d in listed(os.path.join(sp, "jax_plugins"), "*", dirs=True) for p in listed(d, "*.so")]
        for plugin in sorted(plugins):
            obj = lm.load(plugin, None, how="dlopen")
            for major in _plugin_cudnn_majors(lm, obj, fw) if obj is not None else []:
                lm.load(f"libcudnn.so.{major}", obj, how="dlopen", when="first use")
    return True


def _plugin_cudnn_majors(lm, plugin, fw: Framework) -> list[str]:
    """The cuDNN major the JAX CUDA plugin dlopens (``libcudnn.so.<major>``, XLA's dso_loader; data/loaders.json):
    the framework's known cuDNN, else, by inference, the major of the ``libcudnn.so.N`` in the plugin's own
    DT_RPATH folders. Rule: the plugin's ``with-cuda`` extra requires ``nvidia-cudnn-cuXX>=9.x,<10`` (its
    METADATA, data/jax.json ``nvidia_pins``), which puts that major's shim in its ``nvidia/cudnn/lib`` folder."""
    if fw.cudnn:
        return [fw.cudnn.split(".")[0]]
    majors = {m.group(1) for folder in lm.search_folders(plugin) for name in _listdir(folder)
              for m in [re.fullmatch(r"libcudnn\.so\.(\d+)", name)] if m}
    return sorted(majors)


RECIPES = {"torch": _torch, "tensorflow": _tensorflow, "jax": _jax}


def _first_dir(site_packages: list[str], rel: str) -> str | None:
    return next((sp for sp in site_packages if os.path.exists(os.path.join(sp, rel))), None)
