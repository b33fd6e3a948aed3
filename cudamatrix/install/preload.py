"""The notebook path: LD_LIBRARY_PATH changes do not reach a running kernel, so the right copies of
the CUDA libraries are loaded by full path before the framework is imported, or, when a wrong copy
is already mapped into this process, a kernel restart is the only fix.

``decide(wanted)`` reads /proc/self/maps and sys.modules and returns a Decision; ``preload(decision)``
loads the libraries with ``ctypes.CDLL(path, RTLD_GLOBAL)`` in dependency order, so a later
``dlopen("libcudnn.so.9")`` by soname finds the copy already loaded (glibc matches loaded objects by
soname before searching the path: ld.so(8), dlopen(3)).
"""
from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping

from cudamatrix.models import Model
from cudamatrix.names import canonical
from cudamatrix.schema import field, record

# Load order: each library's dependencies come before it. cuBLAS needs cuBLASLt; cuDNN 9's
# sub-libraries load graph -> engines/heuristic -> ops -> cnn -> adv (cuDNN 9 API overview, "library
# dependencies"); cuDNN 8's ops_infer -> ops_train -> cnn_infer -> cnn_train -> adv_infer -> adv_train.
_ORDER = ("libcudart", "libnvrtc", "libnvJitLink", "libcublasLt", "libcublas", "libcufft", "libcurand",
          "libcusparse", "libcusolver", "libcudnn_graph", "libcudnn_engines_precompiled",
          "libcudnn_engines_runtime_compiled", "libcudnn_heuristic", "libcudnn_ops_infer", "libcudnn_ops_train",
          "libcudnn_ops", "libcudnn_cnn_infer", "libcudnn_cnn_train", "libcudnn_cnn", "libcudnn_adv_infer",
          "libcudnn_adv_train", "libcudnn_adv", "libcudnn", "libnccl")
_FRAMEWORK_MODULES = ("torch", "tensorflow", "jax", "jaxlib")

RESTART_LINES = {
    "colab": "import os; os.kill(os.getpid(), 9)",  # Colab restarts a killed runtime by itself
    "kaggle": "import os; os.kill(os.getpid(), 9)",
    "jupyter": "get_ipython().kernel.do_shutdown(True)",
    "python": "exit the interpreter and start it again",
}
# where a person restarts it by hand (the frontends' own menu wording)
RESTART_MENUS = {
    "colab": "Colab: Runtime -> Restart session",
    "kaggle": "Kaggle: Run -> Restart & clear cell outputs",
    "jupyter": "Jupyter: Kernel -> Restart Kernel",
    "python": "exit the interpreter and start it again",
}


@record
class Decision(Model):
    """What to do in this process: ``preload`` these paths, ``restart`` the kernel, or ``nothing``."""

    action: str  # "preload" | "restart" | "nothing" | "failed" (a preload that the loader refused)
    reason: str
    preload: list[str] = field(default_factory=list)  # in load order
    mapped_wrong: list[dict[str, str | None]] = field(default_factory=list)  # {soname, mapped, wanted}
    imported: list[str] = field(default_factory=list)  # frameworks already in sys.modules
    context: str = "python"
    restart_line: str | None = None
    loaded: list[str] = field(default_factory=list)  # filled by preload()


def soname_of(path: str) -> str:
    """``/x/libcudnn.so.9.1.0`` -> ``libcudnn.so.9``; ``libcudart.so.12`` stays."""
    base = os.path.basename(path)
    m = re.match(r"^(lib[\w\-+]+\.so)(\.\d+)?", base)
    return m.group(1) + (m.group(2) or "") if m else base


def _stem(path: str) -> str:
    return os.path.basename(path).split(".so")[0]


def load_order(paths: list[str]) -> list[str]:
    """``paths`` sorted so that dependencies load first; unknown libraries go last, in given order."""
    rank = {name: i for i, name in enumerate(_ORDER)}
    return sorted(paths, key=lambda p: rank.get(_stem(p), len(_ORDER)))


def parse_maps(text: str) -> list[str]:
    """Paths of the shared objects mapped in a /proc/PID/maps text, in first-seen order."""
    seen: dict[str, None] = {}
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and ".so" in parts[5]:
            seen.setdefault(parts[5].strip(), None)
    return list(seen)


def read_maps() -> str:
    try:
        with open("/proc/self/maps") as f:
            return f.read()
    except OSError:
        return ""


def notebook_context(env: Mapping[str, str] | None = None, modules=None) -> str:
    """colab / kaggle / jupyter / python, from this process's modules and environment."""
    env = os.environ if env is None else env
    modules = sys.modules if modules is None else modules
    if "google.colab" in modules or "COLAB_RELEASE_TAG" in env or "COLAB_GPU" in env:
        return "colab"
    if "KAGGLE_KERNEL_RUN_TYPE" in env or "KAGGLE_URL_BASE" in env:
        return "kaggle"
    if "ipykernel" in modules:
        return "jupyter"
    return "python"


def decide(wanted: list[str], *, maps_text: str | None = None, modules=None, context: str | None = None) -> Decision:
    """Compare the libraries this process should use (``wanted``, full paths) with what is mapped.

    A wanted soname mapped from another file means the process already holds the wrong copy:
    restart. Otherwise the wanted files not yet mapped are to be preloaded.
    """
    modules = sys.modules if modules is None else modules
    ctx = context or notebook_context(modules=modules)
    mapped = parse_maps(read_maps() if maps_text is None else maps_text)
    mapped_real = {os.path.realpath(p) for p in mapped}
    by_soname: dict[str, str] = {}
    for p in mapped:
        by_soname.setdefault(soname_of(p), p)
    imported = [m for m in _FRAMEWORK_MODULES if m in modules]
    wrong: list[dict[str, str | None]] = []
    todo: list[str] = []
    for path in wanted:
        real = os.path.realpath(path)
        if real in mapped_real:
            continue
        other = by_soname.get(soname_of(path))
        if other is not None:
            wrong.append({"soname": soname_of(path), "mapped": other, "wanted": path})
        else:
            todo.append(path)
    if wrong:
        names = "; ".join(f"{w['mapped']} is mapped where {w['wanted']} is wanted" for w in wrong)
        who = f" ({', '.join(imported)} already imported)" if imported else ""
        return Decision(action="restart", context=ctx, restart_line=RESTART_LINES[ctx], mapped_wrong=wrong,
                        imported=imported, reason=f"this process already loaded the wrong copy{who}: {names}; "
                                                  "a loaded library cannot be replaced, the kernel must restart")
    if todo:
        return Decision(action="preload", context=ctx, preload=load_order(todo), imported=imported,
                        reason=f"{len(todo)} librar{'y' if len(todo) == 1 else 'ies'} to load by full path "
                               "before the framework is imported")
    return Decision(action="nothing", context=ctx, imported=imported,
                    reason="the right copies are already mapped" if wanted else "no library to preload")


def preload(decision: Decision) -> Decision:
    """Load ``decision.preload`` with RTLD_GLOBAL, in order. Returns the decision with ``loaded`` filled;
    a library that fails to load makes it ``failed``, naming the loader's error."""
    import ctypes

    for path in decision.preload:
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:
            decision.action = "failed"
            decision.reason = f"could not preload {path}: {exc}"
            return decision
        decision.loaded.append(path)
    return decision


def imported_from(site_packages: list[str], modules=None) -> dict[str, list[str]]:
    """The top-level modules this process imported from ``site_packages``, each with the distributions that
    ship it (``importlib.metadata.packages_distributions``, read now: call it before a change)."""
    from importlib.metadata import packages_distributions

    modules = sys.modules if modules is None else modules
    roots = tuple(os.path.join(os.path.realpath(s), "") for s in site_packages if s)
    found = []
    for name, module in list(modules.items()):
        where = getattr(module, "__file__", None) if "." not in name else None
        if where and roots and os.path.realpath(where).startswith(roots):
            found.append(name)
    if not found:
        return {}
    owners = packages_distributions()
    return {name: sorted({canonical(d) for d in owners.get(name, [])}) for name in sorted(found)}


def stale_modules(imported: dict[str, list[str]], before, after, modules=None) -> list[dict]:
    """The imported top-level modules whose distribution a change replaced or removed: what this process holds
    in memory is not what is installed now. Each: module, distribution, the version in memory and on disk
    (None: uninstalled), and how many of its submodules are loaded too."""
    modules = sys.modules if modules is None else modules
    old = {d.name: d.version for d in before}
    new = {d.name: d.version for d in after}
    out = []
    for name, dists in imported.items():
        moved = [d for d in dists if d in old and new.get(d) != old[d]]
        if moved:
            subs = sum(1 for m in list(modules) if m.startswith(name + "."))
            out.append({"module": name, "distribution": moved[0], "in_memory": old[moved[0]],
                        "installed": new.get(moved[0]), "submodules": subs})
    return out
