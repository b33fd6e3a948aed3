"""What the packages built against one exact torch print when they cannot load, read from a paste.

- xFormers' block "xFormers can't load C++/CUDA extensions. xFormers was built for: / PyTorch 2.1.2+cu121 with CUDA
  1201 (you have 2.1.0+cpu) / Python 3.9.13 (you have 3.9.13)" and ``python -m xformers.info``'s version line.
- The loader's "ImportError: .../site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol:
  _ZN3c104cuda9SetDeviceEi" (``OSError`` for the libraries torch.ops.load_library opens) naming a torch symbol
  (c10::, at::, torch::, caffe2::): the package from the file's path, the symbol, demangled when c++filt is there.
- ONNX Runtime's "Failed to load library libonnxruntime_providers_cuda.so with error: libcublasLt.so.11: cannot open
  shared object file" (and Windows' "... which depends on "cublasLt64_12.dll" which is missing"): the CUDA (or
  cuDNN) major its CUDA provider was built for, from the file it could not open.
- bitsandbytes' "Configured CUDA binary not found at .../libbitsandbytes_cuda131.so" (and its older "Could not find
  the bitsandbytes CUDA binary at ..."): the CUDA release whose library it looked for and does not carry.
- pip's resolver: "vllm 0.7.3 requires torch==2.5.1, but you have torch 2.4.0+cu124 which is incompatible." for a
  requirement on a framework, and vLLM's version lines ("vLLM API server version 0.7.3", "Initializing an LLM engine
  (v0.4.0) with config").

Facts go where they belong (the versions in the package list, as a ``pip list`` states them) and the rest in a
:class:`~cudamatrix.models.ToolMessage`; the finding is the diagnose stage's (:mod:`cudamatrix.diagnose.pasted`).
Lines are found with str searches and cut with str methods or bounded, anchored patterns.
"""
from __future__ import annotations

from cudamatrix.detect import cxxfilt
from cudamatrix.detect.python_env import canonical
from cudamatrix.detect.text import Paste, read_anchored
from cudamatrix.models import Environment, ToolMessage
from cudamatrix.safe.text import lazy

# --- xFormers' "built for" block ----------------------------------------------------------------------------------

_XF_HEAD = "xFormers was built for:"
_XF_TORCH = lazy(r"PyTorch ([\w.+-]{1,40}) with CUDA (\w{1,8}) \(you have ([\w.+-]{1,40})\)")
_XF_PYTHON = lazy(r"Python {1,4}(\d{1,2}\.\d{1,3}(?:\.\d{1,3})?) \(you have (\d{1,2}\.\d{1,3}(?:\.\d{1,3})?)\)")
_XF_TAIL = ("Please reinstall xformers", "Memory-efficient attention, SwiGLU", "Set XFORMERS_MORE_DETAILS")
_XF_VERSION = lazy(r"xFormers (\d{1,3}\.\d{1,3}\.\d{1,4}(?:\.?post\d{1,3}|\.dev\d{1,12}|\+\w{1,40})?)$")


def read_xformers(paste: Paste, env: Environment) -> bool:
    """xFormers' warning block: the torch and the Python it was built for, and the ones it found."""
    found = False
    lines = paste.lines
    for i in paste.having(_XF_HEAD):
        head = lines[i].strip()[:300]
        for j in range(i + 1, min(i + 3, len(lines))):
            body = lines[j].strip()[:300]
            torch = _XF_TORCH.match(body)
            python = _XF_PYTHON.match(body)
            if torch:
                built, _, have = torch.groups()  # its CUDA ("1201") is the one of built's local tag
                _say(env, ToolMessage(tool="xformers", kind="extension_built_for", text=f"{head} {body}",
                                      package="xformers", library="torch", built=built, found=have))
                env.packages.setdefault("torch", have)
            elif python:
                env.python.version = env.python.version or python.group(2)
                _say(env, ToolMessage(tool="xformers", kind="extension_built_for", text=f"{head} {body}",
                                      package="xformers", library="python", built=python.group(1),
                                      found=python.group(2)))
            else:
                continue
            paste.claim(j, "xFormers warning")
            found = True
        paste.claim(i, "xFormers warning")
        for j in range(i + 1, min(i + 7, len(lines))):
            if lines[j].strip().startswith(_XF_TAIL):
                paste.claim(j, "xFormers warning")
    for i in paste.having("xFormers "):
        m = _XF_VERSION.match(lines[i].strip())
        if m:  # python -m xformers.info's first line
            env.packages.setdefault("xformers", m.group(1))
            paste.claim(i, "xformers.info")
            found = True
    return found


# --- undefined torch symbols ----------------------------------------------------------------------------------------

_UNDEFINED = ": undefined symbol: "
# the mangled names of torch's C++ namespaces: c10::, at::, torch::, caffe2:: (and their const member functions)
TORCH_SYMBOLS = ("_ZN3c10", "_ZNK3c10", "_ZN2at", "_ZNK2at", "_ZN5torch", "_ZNK5torch", "_ZN6caffe2", "_ZNK6caffe2")
_SYMBOL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.$")
_PATH_QUOTES = "'\"`([{<"
# the module a compiled file is imported as -> the distribution that installs it, where the two names differ
MODULE_DISTS = {
    "flash_attn_2_cuda": "flash-attn", "flash_attn_cuda": "flash-attn", "flash_attn_3_cuda": "flash-attn",
    "flash_attn": "flash-attn", "torch_scatter": "torch-scatter", "torch_sparse": "torch-sparse",
    "torch_cluster": "torch-cluster", "torch_spline_conv": "torch-spline-conv", "pyg_lib": "pyg-lib",
    "sgl_kernel": "sgl-kernel", "vllm_flash_attn": "vllm-flash-attn", "cupy_backends": "cupy",
    "transformer_engine_extensions": "transformer-engine", "transformer_engine": "transformer-engine",
    "amp_C": "apex", "apex_C": "apex", "fused_layer_norm_cuda": "apex", "mmcv": "mmcv", "detectron2": "detectron2",
    "causal_conv1d_cuda": "causal-conv1d", "selective_scan_cuda": "mamba-ssm", "mamba_ssm": "mamba-ssm",
}


def read_undefined_symbols(paste: Paste, env: Environment) -> bool:
    """"ImportError: <path>/<file>.so: undefined symbol: <torch symbol>": a package built against another torch
    (or another C++ ABI) than the one installed. A symbol of another library (the CUDA driver's, libstdc++'s) is
    not read here. The symbols are demangled together, by one c++filt (:func:`demangle_all`)."""
    read = []
    for i in paste.having(_UNDEFINED):
        line = paste.lines[i][:4000]
        at = line.find(_UNDEFINED)
        symbol = _symbol(line[at + len(_UNDEFINED):at + len(_UNDEFINED) + 600])
        if symbol is None or not symbol.startswith(TORCH_SYMBOLS):
            continue
        path = _path_before(line[max(0, at - 600):at])
        if not path.endswith(".so") and ".so." not in path.rpartition("/")[2]:
            continue
        read.append((i, line, symbol, path))
    names = demangle_all([symbol for _, _, symbol, _ in read])
    for i, line, symbol, path in read:
        _say(env, ToolMessage(tool="loader", kind="undefined_symbol", text=line.strip()[:300],
                              package=package_of(path), soname=path.rpartition("/")[2], library="torch",
                              symbol=symbol, demangled=names[symbol]))
        paste.claim(i, "loader error")
    return bool(read)


def _symbol(text: str) -> str | None:
    """The symbol after "undefined symbol: " without the quote, parenthesis or version that may follow it."""
    words = text.split()
    word = words[0] if words else ""
    end = next((k for k, c in enumerate(word) if c not in _SYMBOL_CHARS), len(word))
    word = word[:end].rstrip(".")
    return word if word.startswith("_Z") and len(word) > 4 else None


def _path_before(text: str) -> str:
    """The file named before ": undefined symbol": the last word, without what a repr or a log put before it
    ("ImportError('/usr/.../_C.abi3.so", "OSError: /usr/.../_version_cuda.so")."""
    words = text.split()
    word = words[-1] if words else ""
    for quote in _PATH_QUOTES:
        word = word.rpartition(quote)[2]
    return word.replace("\\", "/")


def package_of(path: str) -> str | None:
    """The distribution a compiled file belongs to: the folder under site-packages (or the module a file directly in
    it is imported as), mapped through :data:`MODULE_DISTS`; else the file's folder ("vllm/_C.abi3.so" of a source
    tree), else the file's module name."""
    parts = [p for p in path.split("/") if p]
    if not parts:
        return None
    top = None
    for k, part in enumerate(parts[:-1]):
        if part in ("site-packages", "dist-packages"):
            top = parts[k + 1]
    if top is None:
        top = parts[-2] if len(parts) >= 2 and parts[-1].startswith("_") else parts[-1]
    module = top.split(".")[0]
    if not module:
        return None
    return MODULE_DISTS.get(module) or canonical(module)


_DEMANGLED: dict[str, str | None] = {}


def demangle_all(symbols: list[str]) -> dict[str, str | None]:
    """Each of ``symbols`` as C++ reads it (binutils' c++filt); None where c++filt is not installed, fails or gives
    the name back unchanged. Those not asked before in this process go to one c++filt run
    (:func:`cudamatrix.detect.cxxfilt.demangled`: one process, not one a symbol)."""
    asked = [s for s in dict.fromkeys(symbols) if s not in _DEMANGLED]
    if asked:
        fit = [s for s in asked if set(s) <= _SYMBOL_CHARS and len(s) <= 600][:200]
        told = dict(zip(fit, cxxfilt.demangled(fit, 5.0) or [], strict=False))
        for s in asked:
            out = told.get(s, "").strip()
            _DEMANGLED[s] = out if out and out != s else None
    return {s: _DEMANGLED[s] for s in symbols}


# --- ONNX Runtime's CUDA provider --------------------------------------------------------------------------------

_PROVIDER = "onnxruntime_providers_cuda"
_WITH_ERROR = " with error: "
_CANNOT_OPEN = ": cannot open shared object file"
_DEPENDS = lazy(r"which depends on \"([\w.-]{1,80}\.dll)\" which is missing")
_PROVIDER_TAIL = ("Failed to create CUDAExecutionProvider", "CUDAExecutionProvider. Please reference",
                  "to ensure all dependencies are met")


def read_onnxruntime(paste: Paste, env: Environment) -> bool:
    """"Failed to load library libonnxruntime_providers_cuda.so with error: libcublasLt.so.11: cannot open shared
    object file": the CUDA provider was built for the CUDA (or cuDNN) major of the file it could not open."""
    found = False
    lines = paste.lines
    for i in paste.having(_PROVIDER):
        line = lines[i][:3000]
        soname = _provider_missing(line)
        if soname is None:
            continue
        library, major = cuda_library_major(soname)
        _say(env, ToolMessage(tool="onnxruntime", kind="provider_load_failed", text=_from_failed(line),
                              package="onnxruntime-gpu", soname=soname, library=library, built=major))
        paste.claim(i, "ONNX Runtime error")
        for j in range(i + 1, min(i + 4, len(lines))):
            if any(t in lines[j] for t in _PROVIDER_TAIL):
                paste.claim(j, "ONNX Runtime error")
        found = True
    return found


def _provider_missing(line: str) -> str | None:
    m = _DEPENDS.search(line)
    if m:
        return m.group(1)
    at = line.find(_WITH_ERROR)
    end = line.find(_CANNOT_OPEN, at)
    if at < 0 or end < 0:
        return None
    name = line[at + len(_WITH_ERROR):end].strip().rpartition("/")[2]
    return name if name.startswith("lib") and ".so" in name and len(name) <= 80 else None


def _from_failed(line: str) -> str:
    at = line.find("Failed to load library")
    return (line[at:] if at >= 0 else line).strip()[:300]


# the CUDA libraries whose file's major is the CUDA major they belong to (libcudart.so.12, libcublasLt.so.12,
# cublasLt64_12.dll); cuDNN's is its own major
_CUDA_MAJOR_LIBRARIES = ("cudart", "cublas", "cublaslt")


def cuda_library_major(soname: str) -> tuple[str | None, str | None]:
    """("cublaslt", "12") for libcublasLt.so.12 or cublasLt64_12.dll, ("cudnn", "9") for libcudnn.so.9; the major
    is None for a library whose file's major is not the CUDA major (cufft, curand, ...)."""
    low = soname.lower()
    if low.endswith(".dll"):
        base, _, digits = low[:-4].partition("64_")
        major = digits[:-1] if len(digits) == 3 and digits.isdigit() and base.startswith("cu") else \
            (digits if digits.isdigit() else None)
        name = base
    else:
        name, _, rest = low.partition(".so.")
        name = name[3:] if name.startswith("lib") else name
        major = rest.split(".")[0] if rest.split(".")[0].isdigit() else None
    if name in _CUDA_MAJOR_LIBRARIES or name.startswith("cudnn"):
        return ("cudnn" if name.startswith("cudnn") else name), major
    return name or None, None


# --- bitsandbytes' per-CUDA library ------------------------------------------------------------------------------

_BNB_MISSING = ("Configured CUDA binary not found at ", "Could not find the bitsandbytes CUDA binary at ")
_BNB_FILE = lazy(r"libbitsandbytes_cuda(\d{2,4})(?:_nocublaslt\d{0,4})?\.so")
_BNB_NATIVE = "Could not load bitsandbytes native library: "
_BNB_OVERRIDE = lazy(r"BNB_CUDA_VERSION=(\d{2,4}) environment variable detected")


def read_bitsandbytes(paste: Paste, env: Environment) -> bool:
    """bitsandbytes' "Configured CUDA binary not found at .../libbitsandbytes_cuda131.so" (0.46.0 on, which then
    raises) and "Could not find the bitsandbytes CUDA binary at PosixPath('.../libbitsandbytes_cuda121.so')" (0.43.1
    to 0.45.5, which then load the CPU library): the CUDA release of the file it looked for (its digits, major then
    minor), named by torch's CUDA unless a "BNB_CUDA_VERSION=N environment variable detected" line says otherwise."""
    found = False
    lines = paste.lines
    override = next((m.group(1) for i in paste.having("BNB_CUDA_VERSION=")
                     if (m := _BNB_OVERRIDE.search(lines[i][:400]))), None)
    for i in paste.having(*_BNB_MISSING):
        line = lines[i][:1000]
        m = _BNB_FILE.search(line)
        if m is None:
            continue
        digits = m.group(1)
        # library: who named the release, the override variable or torch's CUDA
        _say(env, ToolMessage(tool="bitsandbytes", kind="library_not_found", text=line.strip()[:300],
                              package="bitsandbytes", soname=m.group(0), built=f"{digits[:-1]}.{digits[-1]}",
                              library="BNB_CUDA_VERSION" if override == digits else "torch"))
        paste.claim(i, "bitsandbytes error")
        found = True
    if found:  # its CPU library, opened instead (0.43.1 to 0.45.5): the package's own file, not a CUDA library
        for i in paste.having(_BNB_NATIVE):
            paste.claim(i, "bitsandbytes error")
    return found


# --- pip's resolver and vLLM's version lines ----------------------------------------------------------------------

_RESOLVER = "ERROR: pip's dependency resolver"
_CONFLICT = lazy(r"([A-Za-z0-9][\w.-]{0,80}) ([\w.+!-]{1,40}) requires ([A-Za-z0-9][\w.-]{0,80})([^,]{0,120}), "
                 r"but you have ([A-Za-z0-9][\w.-]{0,80}) ([\w.+!-]{1,40}) which is incompatible")
FRAMEWORK_REQUIREMENTS = ("torch", "jax", "jaxlib", "tensorflow")
_VLLM = (lazy(r"vLLM API server version (\d{1,3}\.\d{1,3}\.\d{1,3}[\w.+-]{0,40})"),
         lazy(r"Initializing an? (?:V\d )?LLM engine \(v(\d{1,3}\.\d{1,3}\.\d{1,3}[\w.+-]{0,40})\)"))


def read_pip_conflicts(paste: Paste, env: Environment) -> bool:
    """pip's "X 1.0 requires torch==2.5.1, but you have torch 2.4.0 which is incompatible." lines: every one is pip's
    output; one on a framework is a pin the installed framework breaks (a message); each names two installed
    versions."""
    found = False
    lines = paste.lines
    for i in paste.having(_RESOLVER):
        paste.claim(i, "pip resolver")
    for i in paste.having(", but you have "):
        m = _CONFLICT.search(lines[i][:600])
        if m is None:
            continue
        dist, version, wanted, spec, have, have_version = m.groups()
        dist, wanted, have = canonical(dist), canonical(wanted), canonical(have)
        env.packages.setdefault(dist, version)
        env.packages.setdefault(have, have_version)
        if wanted == have and wanted in FRAMEWORK_REQUIREMENTS:
            _say(env, ToolMessage(tool="pip", kind="requirement_conflict", text=m.group(0)[:300], package=dist,
                                  package_version=version, library=wanted, requirement=spec.strip(),
                                  found=have_version))
        paste.claim(i, "pip resolver")
        found = True
    return found


def read_vllm_versions(paste: Paste, env: Environment) -> bool:
    """vLLM's log lines that state its version."""
    found = False
    for i in paste.having("vLLM API server version", "LLM engine (v"):
        line = paste.lines[i][:1000]
        m = _VLLM[0].search(line) or _VLLM[1].search(line)
        if m:
            env.packages.setdefault("vllm", m.group(1).rstrip(".,"))
            paste.claim(i, "vLLM log")
            found = True
    return found


def _say(env: Environment, said: ToolMessage) -> None:
    """Keep a message unless the paste said the same already (a log repeats its warnings)."""
    key = (said.kind, said.package, said.library, said.built, said.found, said.soname, said.symbol, said.requirement)
    if not any((m.kind, m.package, m.library, m.built, m.found, m.soname, m.symbol, m.requirement) == key
               for m in env.messages):
        env.messages.append(said)


_READERS = (
    ((_XF_HEAD, "xFormers "), read_xformers),
    ((_UNDEFINED,), read_undefined_symbols),
    ((_PROVIDER,), read_onnxruntime),
    (_BNB_MISSING, read_bitsandbytes),
    ((", but you have ", _RESOLVER), read_pip_conflicts),
    (("vLLM API server version", "LLM engine (v"), read_vllm_versions),
)


def read(paste: Paste, env: Environment) -> bool:
    """Every kind of output above; a reader runs only when the paste holds one of its anchors."""
    return read_anchored(paste, env, _READERS)
