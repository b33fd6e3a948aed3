"""What frameworks, the CUDA runtime and the loader print about the machine, read from a paste.

torch: the architecture warning ("... with CUDA capability sm_120 is not compatible with the current PyTorch
installation. The current PyTorch install supports CUDA capabilities sm_50 ... sm_90"), the older "Found GPU0 ...
which is of cuda capability 2.1", "no kernel image is available", "The NVIDIA driver on your system is too old
(found version 11040)", "cuDNN version incompatibility" in its three wordings. TensorFlow and XLA: "Could not load
dynamic library", "Couldn't open CUDA library", "Loaded runtime CuDNN library: X but source was compiled with: Y",
"DNN library is not found". JAX: "CUDA backend failed to initialize" with its "Found cuDNN version ..., but JAX was
built against ..." and "Outdated cuDNN installation found" reports. The CUDA runtime's "CUDA driver version is
insufficient for CUDA runtime version", the loader's "libX.so.N: cannot open shared object file", and WSL's
"/usr/lib/wsl/lib/libcuda.so.1 is not a symbolic link".

Each reader puts the facts the words state where they belong (a GPU and its compute capability among the GPUs,
the driver's CUDA version on the driver, WSL on the context) and the rest in a :class:`ToolMessage`; the finding
the words imply is the diagnose stage's. Lines are found with str searches and cut with str methods or bounded
patterns, so a hostile line costs linear time.
"""
from __future__ import annotations

from cudamatrix.detect.libraries import library_name, version_from_filename
from cudamatrix.detect.text import Paste, cudnn_version, read_anchored, version_from_int
from cudamatrix.models import Driver, Environment, GpuInfo, Library, Note, ToolMessage
from cudamatrix.pastes.merge import merge_driver, merge_gpus
from cudamatrix.safe.text import lazy
from cudamatrix.schema import normalize_cc

# --- torch's architecture warnings ---------------------------------------------------------------

_ARCH = " with CUDA capability sm_"
_ARCH_REST = lazy(r"(\d{2,3}[af]?) is not compatible with the current PyTorch installation")
_SUPPORTS = "supports CUDA capabilities"
_OLD_GPU = " which is of cuda capability "
_OLD_GPU_HEAD = lazy(r"Found GPU(\d{1,2}) ")
_MINIMUM = lazy(r"minimum cuda capability (?:supported by this library )?is (\d{1,2}\.\d{1,2})")
_WARNING_TAIL = ("If you want to use the", "warnings.warn(", "PyTorch no longer supports this GPU",
                 "The minimum cuda capability", "The current PyTorch install supports")
_QUOTES = "\"'`\u201c\u201d.,;:)]"


def read_arch_warning(paste: Paste, env: Environment) -> bool:
    """torch's "X with CUDA capability sm_NN is not compatible with the current PyTorch installation" and the
    arch list after it (same line or the next ones)."""
    found = False
    for i in paste.having(_ARCH):
        line = paste.lines[i]
        at = line.find(_ARCH)
        m = _ARCH_REST.match(line, at + len(_ARCH))  # anchored and bounded: at most 61 characters
        if m is None:
            continue
        name = _gpu_name(line[:at])
        cc = normalize_cc(m.group(1))  # "120" -> "12.0"
        archs, ptx = _arch_list(paste, i, line[m.end():])
        _gpu_fact(env, name, cc, None)
        _say(env, ToolMessage(tool="torch", kind="arch_unsupported", text=line.strip()[:300], gpu=name,
                              compute_capability=cc, archs=archs, ptx=ptx))
        _claim_warning(paste, i, "torch warning")
        found = True
    return found | _read_old_gpu(paste, env)


def _read_old_gpu(paste: Paste, env: Environment) -> bool:
    """Older torch: "Found GPU0 GeForce 820M which is of cuda capability 2.1. PyTorch no longer supports this GPU
    because it is too old. The minimum cuda capability supported by this library is 3.7." (the last sentence
    from torch 1.x on)."""
    found = False
    for i in paste.having(_OLD_GPU):
        line = paste.lines[i]
        at = line.find(_OLD_GPU)
        head = _OLD_GPU_HEAD.search(line, max(0, at - 160), at)
        cc_text = line[at + len(_OLD_GPU):at + len(_OLD_GPU) + 8].rstrip(_QUOTES)
        if head is None or not _is_cc(cc_text):
            continue
        name = line[head.end():at].strip() or None
        minimum = next((m.group(1) for j in range(i, min(i + 4, len(paste.lines)))
                        if (m := _MINIMUM.search(paste.lines[j][:300]))), None)
        _gpu_fact(env, name, cc_text, int(head.group(1)))
        _say(env, ToolMessage(tool="torch", kind="arch_unsupported", text=line.strip()[:300], gpu=name,
                              compute_capability=cc_text, minimum=minimum))
        _claim_warning(paste, i, "torch warning")
        found = True
    return found


def _is_cc(text: str) -> bool:
    major, dot, minor = text.partition(".")
    return bool(dot) and major.isdigit() and minor.isdigit() and len(major) <= 2 and len(minor) <= 2


def _gpu_name(head: str) -> str | None:
    """The GPU's name: the text before " with CUDA capability", without what a log, a quote or a title put
    before it ("[Bug]: ", "service  | ", a quotation mark, "UserWarning: ")."""
    for sep in ("|", "\"", "\u201c", "`", "'", ": ", "\uff1a"):
        head = head.rpartition(sep)[2]
    return head.strip() or None


def _arch_list(paste: Paste, i: int, rest: str) -> tuple[list[str], list[str]]:
    """The SASS and PTX targets after "The current PyTorch install supports CUDA capabilities", on the warning's
    line or one of the three after it."""
    lines = paste.lines
    texts = [rest] + [lines[j] for j in range(i + 1, min(i + 4, len(lines)))]
    for text in texts:
        at = text.find(_SUPPORTS)
        if at >= 0:
            return _targets(text[at + len(_SUPPORTS):at + len(_SUPPORTS) + 400].split())
    return [], []


def _targets(words: list[str]) -> tuple[list[str], list[str]]:
    """["sm_50", "sm_90", "compute_37."] -> (["5.0", "9.0"], ["3.7"]); the list ends at the first other word."""
    archs: list[str] = []
    ptx: list[str] = []
    for word in words:
        word = word.strip(_QUOTES)
        kind = archs if word.startswith("sm_") else ptx if word.startswith("compute_") else None
        if kind is None:
            break
        try:
            kind.append(normalize_cc(word))
        except ValueError:
            break
    return archs, ptx


def _claim_warning(paste: Paste, i: int, kind: str) -> None:
    """The warning's line, the "...torch/cuda/__init__.py:235: UserWarning:" line before it and the lines of the
    same warning after it."""
    lines = paste.lines
    paste.claim(i, kind)
    if i > 0 and lines[i - 1].rstrip().endswith("UserWarning:") and "cuda" in lines[i - 1]:
        paste.claim(i - 1, kind)
    for j in range(i + 1, min(i + 5, len(lines))):
        body = lines[j].strip()
        if body and not any(t in body for t in _WARNING_TAIL):
            return
        if body:
            paste.claim(j, kind)


def _gpu_fact(env: Environment, name: str | None, cc: str, index: int | None) -> None:
    """The GPU a message names: the known GPU of that name (or a truncated one it completes) gains its compute
    capability; otherwise it is one more GPU."""
    def same(g: GpuInfo) -> bool:
        have = g.name
        return name is not None and have is not None and (
            have == name or have.endswith("...") and name.startswith(have[:-3].rstrip()))

    known = next((g for g in env.gpus if same(g)), None)
    if known is None and index is not None:
        known = next((g for g in env.gpus if g.index == index and not g.name), None)
    if known is not None:
        known.compute_capability = known.compute_capability or cc
        return
    at = index if index is not None else max((g.index or 0 for g in env.gpus), default=-1) + 1
    merge_gpus(env, [GpuInfo(index=at, name=name, compute_capability=cc, source="report:torch warning")])


# --- torch's driver and kernel errors ------------------------------------------------------------

_TOO_OLD = lazy(r"The NVIDIA driver on your system is too old \(found version (?P<v>\d{4,6})\)")
_TOO_OLD_REST = ("Please update your GPU driver", "version from the URL", "Alternatively, go to",
                 "a PyTorch version that has been compiled", "of the CUDA driver")
_NO_KERNEL = "no kernel image is available"
_KERNEL_TAIL = ("CUDA kernel errors might be asynchronously reported", "For debugging consider passing",
                "Compile with `TORCH_USE_CUDA_DSA`")
_INSUFFICIENT = ("driver version is insufficient for CUDA runtime version", "cudaErrorInsufficientDriver",
                 "CUDA_ERROR_INSUFFICIENT_DRIVER")


def read_driver_warning(paste: Paste, env: Environment) -> bool:
    """torch's "The NVIDIA driver on your system is too old (found version 11040)": the driver's CUDA is 11.4;
    "Found no NVIDIA driver on your system": none."""
    found = False
    for i in paste.having("driver on your system is too old"):
        m = _TOO_OLD.search(paste.lines[i])
        if m:
            cuda = version_from_int(int(m.group("v")))
            merge_driver(env, Driver(cuda_version=cuda, source="report:torch warning"))
            env.notes.append(Note("report", f"torch says the driver is too old: it runs CUDA {cuda} at most",
                                  "warning"))
            _say(env, ToolMessage(tool="torch", kind="driver_too_old", text=paste.lines[i].strip()[:300],
                                  found=cuda))
            paste.claim(i, "torch warning")
            j = i + 1  # the rest of the message, when it kept its line breaks
            while j < len(paste.lines) and j - i <= 6 and paste.lines[j].strip().startswith(_TOO_OLD_REST):
                paste.claim(j, "torch warning")
                j += 1
            found = True
    for i in paste.having("Found no NVIDIA driver on your system"):
        merge_driver(env, Driver(status="absent", error="Found no NVIDIA driver on your system (torch)"))
        paste.claim(i, "torch warning")
        found = True
    return found


def read_kernel_errors(paste: Paste, env: Environment) -> bool:
    """"CUDA error: no kernel image is available for execution on the device" (torch, or any CUDA program) and
    "CUDA driver version is insufficient for CUDA runtime version" (the CUDA runtime's error 35)."""
    found = False
    lines = paste.lines
    for i in paste.having(_NO_KERNEL):
        line = lines[i]
        torch = any(w in line for w in ("CUDA error:", "THCudaCheck", "cuda runtime error", "RuntimeError"))
        _say(env, ToolMessage(tool="torch" if torch else "cuda runtime", kind="no_kernel_image",
                              text=line.strip()[:300]))
        paste.claim(i, "torch error" if torch else "CUDA error")
        _claim_following(paste, i, _KERNEL_TAIL, "torch error" if torch else "CUDA error")
        found = True
    for i in paste.having(*_INSUFFICIENT):
        line = lines[i]
        tool = "onnxruntime" if "onnxruntime" in line else ("jax" if "versions_helpers" in line else "cuda runtime")
        _say(env, ToolMessage(tool=tool, kind="driver_insufficient", text=line.strip()[:300]))
        paste.claim(i, "CUDA error")
        if i > 0 and lines[i - 1].strip().endswith("returned 35"):
            paste.claim(i - 1, "CUDA error")
        found = True
    return found


def _claim_following(paste: Paste, i: int, starts: tuple[str, ...], kind: str) -> None:
    """Claim the lines right after ``i`` that start with one of ``starts`` (the rest of one message)."""
    j = i + 1
    while j < len(paste.lines) and j - i <= 4 and paste.lines[j].strip().startswith(starts):
        paste.claim(j, kind)
        j += 1


_NO_DEVICE = ("no CUDA-capable device is detected", "CUDA_ERROR_NO_DEVICE", "No CUDA GPUs are available")
_PADDLE = lazy(r"device: (\d{1,3}), GPU Compute Capability: (\d{1,2}\.\d{1,2}), Driver API Version: "
               r"(\d{1,3}\.\d{1,2}), Runtime API Version: (\d{1,3}\.\d{1,2})")


def read_devices(paste: Paste, env: Environment) -> bool:
    """The CUDA runtime or driver finding no device ("no CUDA-capable device is detected", cuInit's
    CUDA_ERROR_NO_DEVICE, torch's "No CUDA GPUs are available"): the driver loads but shows no GPU. And Paddle's
    "Please NOTE: device: 0, GPU Compute Capability: 8.6, Driver API Version: 12.0, Runtime API Version: 11.7"."""
    found = False
    for i in paste.having(*_NO_DEVICE):
        line = paste.lines[i].strip()
        merge_driver(env, Driver(status="no_device", error=_clip(line)))
        paste.claim(i, "CUDA error")
        found = True
    for i in paste.having("Driver API Version: "):
        m = _PADDLE.search(paste.lines[i][:600])
        if m:
            merge_gpus(env, [GpuInfo(index=int(m.group(1)), compute_capability=m.group(2), source="report:paddle")])
            merge_driver(env, Driver(cuda_version=m.group(3), source="report:paddle"))
            paste.claim(i, "Paddle device note")
            found = True
    return found


# --- cuDNN versions: torch, TensorFlow / XLA, JAX ---------------------------------------------------

_TORCH_TUPLES = lazy(r"compiled {1,4}against \((\d{1,2}), (\d{1,3}), (\d{1,3})\) but found runtime version "
                     r"\((\d{1,2}), (\d{1,3}), (\d{1,3})\)")
_TORCH_INTS = lazy(r"compiled {1,4}against (\d{3,6}) but linked against (\d{3,6})")
_CAFFE2 = lazy(r"cuDNN compiled \((\d{3,6})\) and runtime \((\d{3,6})\) versions mismatch")
_LOADED = lazy(r"Loaded runtime CuDNN library: (\d[\d.]{0,11})(?: \(compatibility version \d{1,6}\))? "
               r"but source was compiled with:? (\d[\d.]{0,11})")
_JAX_FOUND = lazy(r"Found (\w{2,12}) version (\d{3,6}), but JAX was built against version (\d{3,6})")
_JAX_OUTDATED = lazy(r"Outdated (\w{2,12}) installation found")
_JAX_LINES = {"built": "Version JAX was built against:", "minimum": "Minimum supported:",
              "found": "Installed version:"}
_JAX_MISSING = lazy(r"Unable to load (\w{2,12})\.")  # "Unable to load cuDNN. Is it installed?", "... CUDA."
_JAX_BACKEND = ("CUDA backend failed to initialize", "Unable to initialize backend 'cuda'",
                "Backend 'cuda' failed to initialize")


def read_cudnn_versions(paste: Paste, env: Environment) -> bool:
    """torch's "cuDNN version incompatibility: PyTorch was compiled against (8, 7, 0) but found runtime version
    (8, 2, 4)" (and its 0.x/1.x wordings), TensorFlow's and XLA's "Loaded runtime CuDNN library: 8.0.4 but source
    was compiled with: 8.1.0"."""
    found = False
    for i in paste.having("PyTorch was compiled", "cuDNN compiled ("):
        pair = _torch_cudnn(paste.lines[i][:2000])
        if pair:
            _say(env, ToolMessage(tool="torch", kind="library_version", library="cudnn", built=pair[0],
                                  found=pair[1], text=paste.lines[i].strip()[:300]))
            paste.claim(i, "torch error")
            found = True
    for i in paste.having("Loaded runtime CuDNN library: "):
        line = paste.lines[i]
        m = _LOADED.search(line[:2000])
        if m:
            loaded, built = (_dotted_cudnn(v.rstrip(".")) for v in m.groups())
            tool = "tensorflow" if "tensorflow/" in line else "xla"
            _say(env, ToolMessage(tool=tool, kind="library_version", library="cudnn", built=built, found=loaded,
                                  text=line.strip()[:300]))
            _loaded_library(env, "cudnn", loaded, f"report:{'tensorflow' if tool == 'tensorflow' else 'xla'}")
            paste.claim(i, "TensorFlow/XLA log")
            found = True
    return found


def _loaded_library(env: Environment, name: str, version: str | None, origin: str) -> None:
    """The copy a framework says it loaded ("Loaded runtime CuDNN library: 8.0.4"), among the libraries: the one
    its loader picked, of that version (its folder is not said)."""
    if not version or any(lib.name == name and lib.version == version and lib.loaded_first for lib in env.libraries):
        return
    soname = f"lib{name}.so.{version.split('.')[0]}"
    env.libraries.append(Library(name=name, soname=soname, path=soname, origin=origin, version=version,
                                 loaded_first=True))


def _torch_cudnn(line: str) -> tuple[str | None, str | None] | None:
    """(compiled, runtime) cuDNN of one of torch's wordings."""
    m = _TORCH_TUPLES.search(line)
    if m:
        g = m.groups()
        return ".".join(g[:3]), ".".join(g[3:])
    m = _TORCH_INTS.search(line) or _CAFFE2.search(line)
    if m:
        return cudnn_version(int(m.group(1))), cudnn_version(int(m.group(2)))
    return None


def _dotted_cudnn(value: str) -> str | None:
    """"8.1.0" as it is; "7101" (older TensorFlow) through cuDNN's integer encoding."""
    return cudnn_version(int(value)) if value.isdigit() else value


def read_jax(paste: Paste, env: Environment) -> bool:
    """JAX's "CUDA backend failed to initialize: ..." (and "Unable to initialize backend 'cuda': ..."): a component
    older than JAX was built against, an outdated installation below JAX's minimum, or one it could not load."""
    found = False
    lines = paste.lines
    for i in paste.having(*_JAX_BACKEND, ", but JAX was built against version", "Outdated "):
        line = lines[i][:2000]
        text = line.strip()[:300]
        said = _jax_found(line, text) or _jax_outdated(paste, i, line, text) or _jax_missing(line, text)
        if said is None and not any(b in line for b in _JAX_BACKEND):
            continue
        if said is not None:
            _say(env, said)
        paste.claim(i, "JAX error")
        found = True
    return found


def _jax_found(line: str, text: str) -> ToolMessage | None:
    m = _JAX_FOUND.search(line)
    if m is None:
        return None
    name = m.group(1)
    return ToolMessage(tool="jax", kind="library_version", text=text, library=_component(name),
                       found=_jax_version(name, m.group(2)), built=_jax_version(name, m.group(3)))


def _jax_outdated(paste: Paste, i: int, line: str, text: str) -> ToolMessage | None:
    """"Outdated cuDNN installation found." and, on the lines after it, the versions built against, accepted
    and installed."""
    m = _JAX_OUTDATED.search(line)
    if m is None:
        return None
    name = m.group(1)
    said = ToolMessage(tool="jax", kind="library_version", text=text, library=_component(name))
    for j in range(i + 1, min(i + 6, len(paste.lines))):
        body = paste.lines[j]
        for attr, label in _JAX_LINES.items():
            at = body.find(label)
            number = body[at + len(label):].strip()[:8].rstrip(".") if at >= 0 else ""
            if number.isdigit():
                setattr(said, attr, _jax_version(name, number))
                paste.claim(j, "JAX error")
    return said


def _jax_missing(line: str, text: str) -> ToolMessage | None:
    m = _JAX_MISSING.search(line)
    if m is None:
        return None
    return ToolMessage(tool="jax", kind="library_missing", text=text, library=_component(m.group(1)))


def _component(name: str) -> str:
    """JAX's names of CUDA components as library names: "cuDNN" -> "cudnn", "CUDA" -> "cudart"."""
    low = name.lower()
    return "cudart" if low == "cuda" else low


def _jax_version(name: str, number: str) -> str:
    """JAX prints each component's own integer: cuDNN's (8906 = 8.9.6) and the CUDA runtime's (12010 = 12.1)
    are decoded; the others stay as printed (their encodings differ)."""
    low = name.lower()
    if low == "cudnn":
        return cudnn_version(int(number)) or number
    if low == "cuda":
        return version_from_int(int(number)) or number
    return number


# --- libraries that could not be loaded ------------------------------------------------------------

_TF_MISSING = lazy(r"Could not load dynamic library '([^'\s]{1,80})'")
_TF_OLD_MISSING = lazy(r"Couldn't open CUDA library (\S{1,80})")
_CANNOT_OPEN = ": cannot open shared object file"
_DLL = lazy(r"Could not (?:load library|locate) ([\w.-]{1,80}\.dll)")
# TensorFlow's cudart_stub.cc says this where it cannot open the CUDA runtime (libcudart), whatever its words say
_NO_CUDART = "Could not find cuda drivers on your machine"
# a package's own library, not one of CUDA's: bitsandbytes' CPU library, opened when it has no CUDA one (its reader,
# pastes/extensions.py, says which CUDA release it has no library for)
_PACKAGES_OWN = ("libbitsandbytes_",)
_TF_LINES = ("successfully opened CUDA library", "Successfully opened dynamic library", "Cannot dlopen some GPU",
             "DNN library initialization failed")


def read_missing_libraries(paste: Paste, env: Environment) -> bool:
    """TensorFlow's "Could not load dynamic library 'libcudnn.so.8'; dlerror: ..." (and its 1.x "Couldn't open
    CUDA library libcudnn.so.5", "Unable to load cuDNN DSO"), "DNN library is not found", the loader's
    "libcudnn.so.9: cannot open shared object file" and Windows' "Could not load library cudnn_cnn_infer64_8.dll"."""
    found = _read_tf_missing(paste, env)
    for i in paste.having(_CANNOT_OPEN, "Could not load library", "Could not locate"):
        soname = _missing_soname(paste.lines[i][:2000])
        if soname is None or soname.startswith(_PACKAGES_OWN):
            continue
        if paste.free(i):
            _say(env, ToolMessage(tool="loader", kind="library_missing", soname=soname, library=_library_of(soname),
                                  text=paste.lines[i].strip()[:300]))
            paste.claim(i, "loader error")
        found = True
    return found


def _read_tf_missing(paste: Paste, env: Environment) -> bool:
    """TensorFlow's loader lines; the lines around them (the libraries it did open, "Cannot dlopen some GPU
    libraries") are claimed where it could not open one."""
    found = False
    lines = paste.lines
    missing = paste.having("Could not load dynamic library", "Couldn't open CUDA library", "Unable to load cuDNN DSO",
                           "DNN library is not found", _NO_CUDART)
    for i in sorted(set(missing) | set(paste.having(*_TF_LINES) if missing else ())):
        line = lines[i][:2000]
        m = _TF_MISSING.search(line) or _TF_OLD_MISSING.search(line)
        soname = m.group(1).rstrip(".;") if m else None
        said = _library_of(soname) if soname else "cudart" if _NO_CUDART in line else \
            "cudnn" if "Unable to load cuDNN DSO" in line or "DNN library is not found" in line else None
        if said:
            _say(env, ToolMessage(tool="tensorflow", kind="library_missing", soname=soname, library=said,
                                  text=line.strip()[:300]))
        paste.claim(i, "TensorFlow/XLA log")
        found = True
    return found


def _missing_soname(line: str) -> str | None:
    """The file named before ": cannot open shared object file" ("libcudnn.so.8"), or the DLL Windows could not
    load; None when the word there is no library's file name."""
    m = _DLL.search(line)
    if m:
        return m.group(1)
    at = line.find(_CANNOT_OPEN)
    if at < 0:
        return None
    word = line[max(0, at - 120):at].split()[-1:] or [""]
    name = word[0].strip(_QUOTES).rpartition("/")[2]
    return name if name.startswith("lib") and ".so" in name else None


def _library_of(soname: str) -> str:
    """"libcudnn_cnn_infer.so.8" -> "cudnn", "cudart64_110.dll" -> "cudart", "libcuda.so" -> "cuda"."""
    base = soname.lower()
    base = base[3:] if base.startswith("lib") else base
    n = len(base) - len(base.lstrip("abcdefghijklmnopqrstuvwxyz"))
    return base[:n] or soname


# --- TensorFlow's devices ----------------------------------------------------------------------------------

_TF_FOUND = lazy(r"Found device (\d{1,3}) with properties")
_TF_CREATED = lazy(r"device: (\d{1,3}), name: ([^,\n]{1,120}), pci bus id: [^,)\n]{0,40}"
                   r"(?:, compute capability: (\d{1,2}\.\d{1,2}))?")
_TF_DEVICE = ("compute capability: ", "TensorFlow device (")


def read_tf_devices(paste: Paste, env: Environment) -> bool:
    """TensorFlow's "Found device 0 with properties:" and the line after it ("name: Tesla K80 major: 3 minor: 7" in
    1.x, "pciBusID: ... name: Quadro P6000 computeCapability: 6.1" in 2.x), and "Created device ... -> device: 0,
    name: NVIDIA GeForce RTX 3090, pci bus id: 0000:01:00.0, compute capability: 8.6"."""
    found = False
    lines = paste.lines
    for i in paste.having("with properties"):
        m = _TF_FOUND.search(lines[i][:600])
        gpu = _tf_properties(lines[i + 1][:600]) if m and i + 1 < len(lines) else None
        if m and gpu is not None:  # a GPU only after "Found device N"
            gpu.index = int(m.group(1))
            merge_gpus(env, [gpu])
            paste.claim_range(i, min(i + 3, len(lines) - 1), "TensorFlow/XLA log")
            found = True
    for i in paste.having(*_TF_DEVICE):
        line = lines[i][:800]
        c = _TF_CREATED.search(line) if "-> " in line else None
        if c:
            merge_gpus(env, [GpuInfo(index=int(c.group(1)), name=c.group(2).strip(), compute_capability=c.group(3),
                                     source="report:tensorflow")])
        if c or "TensorFlow device (" in line and "-> " in line:  # a line cut inside the name: read, no GPU
            paste.claim(i, "TensorFlow/XLA log")
            found = True
    return found


def _tf_properties(line: str) -> GpuInfo | None:
    """"name: Tesla K80 major: 3 minor: 7 ..." or "pciBusID: 0000:3b:00.0 name: Quadro P6000 computeCapability: 6.1"."""
    at = line.find("name: ")
    if at < 0:
        return None
    rest = line[at + 6:]
    for end_word in (" major: ", " computeCapability: "):
        end = rest.find(end_word)
        if end > 0:
            cc = rest[end + len(end_word):].split()[0] if rest[end + len(end_word):].split() else ""
            if end_word == " major: ":
                minor = rest.split(" minor: ", 1)[1].split()[0] if " minor: " in rest else ""
                cc = f"{cc}.{minor}"
            if _is_cc(cc):
                return GpuInfo(name=rest[:end].strip(), compute_capability=cc, source="report:tensorflow")
    return None


# --- containers: the NVIDIA Container Toolkit's requirement check ------------------------------------------

_REQUIREMENT = "requirement error: unsatisfied condition: "
_CONDITION = lazy(r"cuda ?>= ?(\d{1,2}\.\d{1,2})")
_EARLIER = "use an earlier cuda container"
_CONTAINER_LINES = ("Error response from daemon", "OCI runtime create failed", "error running hook",
                    "error running prestart hook", "ERRO[")


def read_container_requirement(paste: Paste, env: Environment) -> bool:
    """nvidia-container-cli's "requirement error: unsatisfied condition: cuda>=12.8, please update your driver to
    a newer version, or use an earlier cuda container": the image requires CUDA 12.8 and the driver runs an older
    CUDA (the check compares the image's NVIDIA_REQUIRE_CUDA with the driver's CUDA version). The daemon's lines
    around it are the same error."""
    found = False
    lines = paste.lines
    for i in paste.having(_REQUIREMENT):
        line = lines[i][:4000]
        at = line.find(_REQUIREMENT)
        m = _CONDITION.match(line, at + len(_REQUIREMENT))
        if m is None:
            continue
        env.context.container = env.context.container or "docker"
        text = line[at:]  # "requirement error: unsatisfied condition: cuda>=12.8, please update ..."
        end = text.find(_EARLIER)
        text = text[:end + len(_EARLIER)] if end >= 0 else text.strip()  # without a daemon's escaped quotes
        _say(env, ToolMessage(tool="nvidia-container-cli", kind="container_requirement", library="cuda",
                              minimum=m.group(1), text=text[:300]))
        paste.claim(i, "container error")
        for j in (i - 1, i + 1):
            if 0 <= j < len(lines) and any(w in lines[j] for w in _CONTAINER_LINES):
                paste.claim(j, "container error")
        found = True
    return found


# --- where a driver could not be reached: a container, WSL, a kernel without the module ---------------------

_NO_DRIVER = ("couldn't communicate with the NVIDIA driver", "Driver Not Loaded", "Found no NVIDIA driver",
              "couldn't find libnvidia-ml")
_GPU_FLAGS = ("--gpus", "--runtime=nvidia", "--runtime nvidia", "nvidia.com/gpu", "--device=nvidia.com",
              "--device nvidia.com")
_MODULE_MISSING = "Module nvidia not found"
_WSL_VERSION = ("WSL version", "WSL \u7248\u672c")  # wsl --version's first line, English and Chinese
_HEX = frozenset("0123456789abcdef")


def read_driver_place(paste: Paste, env: Environment) -> bool:
    """Where a paste that says the driver could not be reached was taken, as far as it shows: a container (a
    ``docker run`` without ``--gpus`` or the NVIDIA runtime, or a prompt whose host name is a container id), WSL
    (a prompt under /mnt/c, ``wsl`` commands or version lines) or a machine whose kernel has no NVIDIA module
    (modprobe's "Module nvidia not found": a kernel updated without the driver's module rebuilt)."""
    if not any(w in paste.text for w in _NO_DRIVER):
        return False
    found = False
    for i in sorted(paste.commands):
        line, prompt = paste.lines[i].strip(), paste.prompts.get(i, "")
        if line.startswith(("docker run", "sudo docker run")):
            if not any(flag in line for flag in _GPU_FLAGS):
                found |= _place(env, ToolMessage(tool="docker", kind="run_without_gpus", text=line[:300]))
        elif _container_host(prompt):
            found |= _place(env, ToolMessage(tool="shell", kind="in_container", text=(prompt + line)[:300]))
        if "/mnt/c/" in prompt or line.startswith(("wsl ", "wsl.exe")):
            found |= _wsl_fact(env, (prompt + line).strip())
    for i in paste.having(_MODULE_MISSING):
        found |= _place(env, ToolMessage(tool="modprobe", kind="module_missing", library="nvidia",
                                         text=paste.lines[i].strip()[:300]))
        paste.claim(i, "modprobe error")
    for i in paste.having(*_WSL_VERSION):
        found |= _wsl_fact(env, paste.lines[i].strip())
        paste.claim(i, "wsl --version")
    return found


def _place(env: Environment, said: ToolMessage) -> bool:
    """Keep the first line that shows a place (a container, a missing module): one is evidence enough, and a long
    log repeats it."""
    if said.kind in ("run_without_gpus", "in_container"):
        env.context.container = env.context.container or "docker"
    if not any(m.kind == said.kind for m in env.messages):
        _say(env, said)
    return True


def _container_host(prompt: str) -> bool:
    """A prompt's host name is a container id: Docker names a container's host after the first 12 hex digits of
    its id ("root@24c96d985c30:/#", "[root@24c96d985c30 /]#")."""
    at = prompt.find("@")
    host = prompt[at + 1:at + 13] if at >= 0 else ""
    return len(host) == 12 and set(host) <= _HEX and not host.isdigit()


def _wsl_fact(env: Environment, text: str) -> bool:
    """The machine is a WSL 2 guest (said once, with the first line that shows it)."""
    env.context.wsl = True
    env.context.os = env.context.os or "linux"
    if not any(m.kind == "wsl" for m in env.messages):
        _say(env, ToolMessage(tool="shell", kind="wsl", text=text[:300]))
    return True


# --- WSL ---------------------------------------------------------------------------------------------

def read_wsl(paste: Paste, env: Environment) -> bool:
    """ldconfig on WSL: "/usr/lib/wsl/lib/libcuda.so.1 is not a symbolic link". Not noise: the machine is a WSL 2
    guest whose driver is the Windows one, and its libcuda lives in /usr/lib/wsl/lib."""
    found = False
    for i in paste.having("is not a symbolic link"):
        line = paste.lines[i]
        at = line.find("/usr/lib/wsl/lib/")
        if at < 0:
            continue
        path = line[at:].split()[0]
        soname = path.rpartition("/")[2]
        if not found:
            env.context.wsl = True
            env.context.os = env.context.os or "linux"
            env.notes.append(Note("report", "WSL: the driver is the Windows one; libcuda comes from /usr/lib/wsl/lib"))
        if soname.startswith("libcuda.so") and not any(lib.path == path for lib in env.libraries):
            env.libraries.append(Library(name="cuda", soname=soname, path=path, origin="report:ldconfig"))
        paste.claim(i, "ldconfig -p")
        found = True
    return found


def read_wsl_folder(paste: Paste, env: Environment) -> bool:
    """A paste that names WSL's driver folder /usr/lib/wsl/lib ("`libcuda.so` lives in `/usr/lib/wsl/lib`", a
    loader path under it): the machine is a WSL 2 guest. The line stays the prose it is (not claimed)."""
    if env.context.wsl:
        return False
    at = paste.text.find("/usr/lib/wsl/lib")
    if at < 0:
        return False
    env.context.wsl = True
    env.context.os = env.context.os or "linux"
    env.notes.append(Note("report", f"WSL: the paste names WSL's driver folder /usr/lib/wsl/lib (line "
                                    f"{paste.line_of(at) + 1})"))
    return False  # a fact, but no tool's output: the paste is not "recognised" by it


def read_wsl_template(paste: Paste, env: Environment) -> bool:
    """WSL's issue template: "- [X] WSL 2" ticked."""
    found = False
    for i in paste.having("[X] WSL 2", "[x] WSL 2"):
        if paste.lines[i].strip().lstrip("-* ").startswith(("[X] WSL 2", "[x] WSL 2")):
            env.context.wsl = True
            env.context.os = env.context.os or "linux"
            paste.claim(i, "WSL issue template")
            found = True
    return found


# --- what TensorFlow opened, what it could not, and cuda-python's dlopen -------------------------------------

_OPENED = ("Successfully opened dynamic library ", "successfully opened CUDA library ")
_CANNOT_DLOPEN = "Cannot dlopen some GPU libraries"
_FAILED_DLOPEN = "Failed to dlopen "


def read_opened(paste: Paste, env: Environment) -> bool:
    """TensorFlow's "Successfully opened dynamic library libcudnn.so.8" (1.x: "successfully opened CUDA library
    libcublas.so.8.0 locally"): the copy of a tracked CUDA library it loaded (its folder is not said); and "Cannot
    dlopen some GPU libraries" where the paste names no library it could not open or found too old: a CUDA library
    is missing, which one the log above it (not pasted) said."""
    found = False
    opened = {lib.soname for lib in env.libraries if lib.origin == "report:tensorflow"}
    for i in paste.having(*_OPENED):
        line = paste.lines[i][:2000]
        at = max(line.find(w) + len(w) if w in line else -1 for w in _OPENED)
        soname = line[at:].split()[0].strip(_QUOTES) if line[at:].split() else ""
        name = library_name(soname)
        if name and soname not in opened:
            opened.add(soname)
            env.libraries.append(Library(name=name, soname=soname, path=soname, origin="report:tensorflow",
                                         version=version_from_filename(soname), loaded_first=True))
        paste.claim(i, "TensorFlow/XLA log")
        found = True
    for i in paste.having(_CANNOT_DLOPEN):
        if not any(m.kind in ("library_missing", "library_version") for m in env.messages):  # none said which
            _say(env, ToolMessage(tool="tensorflow", kind="library_missing", text=paste.lines[i].strip()[:300]))
        paste.claim(i, "TensorFlow/XLA log")
        if i + 1 < len(paste.lines) and paste.lines[i + 1].strip().startswith("Skipping registering GPU devices"):
            paste.claim(i + 1, "TensorFlow/XLA log")
        found = True
    for i in paste.having(_FAILED_DLOPEN):  # cuda-python: "RuntimeError: Failed to dlopen libcuda.so"
        line = paste.lines[i][:2000]
        words = line[line.find(_FAILED_DLOPEN) + len(_FAILED_DLOPEN):].split()
        soname = words[0].strip(_QUOTES) if words else ""
        if soname.startswith("lib") and ".so" in soname:
            _say(env, ToolMessage(tool="cuda-python", kind="library_missing", soname=soname,
                                  library=_library_of(soname), text=line.strip()[:300]))
            paste.claim(i, "loader error")
            found = True
    return found


# --- JAX: a CPU jaxlib, its CUDA plugin of another release ----------------------------------------------------

_CPU_JAXLIB = "cuda-enabled jaxlib is not installed"
_PLUGIN = lazy(r"JAX plugin (jax_cuda\d{2}_(?:plugin|pjrt)) version ([\w.+]{1,40}) is installed, ?but it is not "
               r"compatible with the installed jaxlib version ([\w.+]{1,40})")
_PJRT = lazy(r"Mismatched PJRT plugin PJRT API version \((\d{1,3}\.\d{1,4})\) and framework PJRT API version "
             r"(\d{1,3}\.\d{1,4})")


def read_jax_builds(paste: Paste, env: Environment) -> bool:
    """JAX's "An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed. Falling back
    to cpu." (in any case: people retype it lower-case): the jaxlib is a CPU build. "JAX plugin jax_cuda12_plugin
    version 0.9.2 is installed, but it is not compatible with the installed jaxlib version 0.9.0.1" (on one line or
    two): both versions, and the plugin is of another release. "Mismatched PJRT plugin PJRT API version (0.54) and
    framework PJRT API version 0.51)": the same, told by the plugin's API version."""
    found = False
    lines = paste.lines
    for i in paste.having_lower(_CPU_JAXLIB):
        line = lines[i]
        if _CPU_JAXLIB in line[:2000].lower():
            _say(env, ToolMessage(tool="jax", kind="cpu_only_build", library="jaxlib", text=line.strip()[:300]))
            paste.claim(i, "JAX warning")
            found = True
    for i in paste.having("JAX plugin jax_cuda"):
        two = lines[i][:600].strip() + (" " + lines[i + 1][:600].strip() if i + 1 < len(lines) else "")
        m = _PLUGIN.search(two)
        if m is None:
            continue
        dist, plugin, jaxlib = m.group(1).replace("_", "-"), m.group(2), m.group(3).rstrip(".")
        env.packages.setdefault(dist, plugin)
        env.packages.setdefault("jaxlib", jaxlib)
        _say(env, ToolMessage(tool="jax", kind="library_version", library=dist, built=jaxlib, found=plugin,
                              text=two[:300]))
        paste.claim_range(i, min(i + 1, len(lines) - 1) if "but it is not" not in lines[i] else i, "JAX warning")
        found = True
    for i in paste.having("Mismatched PJRT plugin"):
        m = _PJRT.search(lines[i][:2000])
        if m:
            _say(env, ToolMessage(tool="jax", kind="library_version", library="pjrt", built=m.group(2),
                                  found=m.group(1), text=lines[i].strip()[:300]))
            paste.claim(i, "JAX error")
            found = True
    return found


def read(paste: Paste, env: Environment) -> bool:
    """Every kind of message above. A reader runs only when the paste holds one of its anchors (a few substrings
    that every message it reads contains): one search of the text each, where its own words would cost several."""
    return read_anchored(paste, env, _READERS)


def _read_wsl(paste: Paste, env: Environment) -> bool:
    return read_wsl(paste, env) | read_wsl_template(paste, env)


_READERS = (
    (("CUDA capability ", "cuda capability "), read_arch_warning),
    (("driver on your system",), read_driver_warning),
    (("-capable device", "NO_DEVICE", "No CUDA GPUs", "Driver API Version"), read_devices),
    (("no kernel image", "nsufficient", "INSUFFICIENT_DRIVER"), read_kernel_errors),
    (("ompiled",), read_cudnn_versions),  # "PyTorch was compiled", "cuDNN compiled (", "source was compiled with"
    (("JAX", "ackend"), read_jax),  # "Unable to load cuDNN. Is it installed?" follows "CUDA backend failed"
    (("Could not lo", "Couldn't open", "cuDNN DSO", "DNN library is not found", "cannot open shared",
      "Could not find cuda drivers"), read_missing_libraries),
    (("with properties",) + _TF_DEVICE, read_tf_devices),
    (("symbolic link", "] WSL 2"), _read_wsl),
    (("unsatisfied condition",), read_container_requirement),
    (("docker run", "Module nvidia not found", "/mnt/c/", "wsl", "WSL"), read_driver_place),
    (_OPENED + (_CANNOT_DLOPEN, _FAILED_DLOPEN), read_opened),
    (("jaxlib", "JAX plugin", "PJRT"), read_jax_builds),
    (("/usr/lib/wsl/lib",), read_wsl_folder),
)


_KEY_WORDS = ("Could not find cuda drivers", "no CUDA-capable device", "CUDA_ERROR_NO_DEVICE", "No CUDA GPUs", "is not compatible", "which is of cuda capability", "no kernel image", "too old", "insufficient",
              "InsufficientDriver", "INSUFFICIENT_DRIVER", "compiled", "but JAX was built", "Outdated",
              "cannot open", "Could not load", "Couldn't open", "Unable to load", "DNN library", "Could not locate",
              "requirement error")


def _clip(text: str) -> str:
    """The sentence that says it: a long log line cut to its message ("...RuntimeError: CUDA error: no kernel image
    is available for execution on the device"), without the advice that follows it."""
    text = text.strip()
    at = min((i for i in (text.find(w) for w in _KEY_WORDS) if i >= 0), default=-1)
    if at < 0 or len(text) <= 160:
        return text[:300]
    start = max(0, at - 80)
    end = text.find(". ", at)
    clipped = text[start:end + 1 if 0 <= end < at + 240 else at + 240].strip()
    return ("..." if start else "") + clipped


def _say(env: Environment, said: ToolMessage) -> None:
    """Keep a message unless the paste said the same thing already (a log repeats its lines; TensorFlow says
    "Couldn't open CUDA library libcudnn.so.5" and then "Unable to load cuDNN DSO")."""
    if said.kind == "library_missing":
        same = next((m for m in env.messages if m.kind == "library_missing" and m.tool == said.tool and
                     m.library == said.library and (m.soname is None or said.soname is None)), None)
        if same is not None:
            same.soname = same.soname or said.soname
            return
    key = (said.tool, said.kind, said.library, said.soname, said.built, said.found, said.gpu,
           said.compute_capability)
    if not any((m.tool, m.kind, m.library, m.soname, m.built, m.found, m.gpu, m.compute_capability) == key
               for m in env.messages):
        said.text = _clip(said.text)
        env.messages.append(said)


def settle(env: Environment) -> None:
    """After every reader: torch's own cuDNN from its "compiled against" message, when the paste named torch."""
    torch = next((f for f in env.frameworks if f.name == "torch"), None)
    built = next((m.built for m in env.messages if m.tool == "torch" and m.library == "cudnn" and m.built), None)
    if torch is not None and torch.cudnn is None and built:
        torch.cudnn = built
