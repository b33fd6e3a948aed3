"""Labelled fields: ``python -m torch.utils.collect_env`` of every torch release (colons or not, full-width
colons, the sectioned layout with ``=====`` banners), its vLLM variant, SGLang's ``check_env``,
``jax.print_environment_info()`` and the fields of issue templates ("- PyTorch Version (e.g., 1.0): 1.5").

A line is cut at its first colon with str methods; the label is looked up in a table, so nothing here
backtracks on a long line.
"""
from __future__ import annotations

import re

from cudamatrix.detect.libraries import _soname_guess, library_name, version_from_filename
from cudamatrix.detect.python_env import canonical, torch_variant
from cudamatrix.detect.smi import gpu_line
from cudamatrix.detect.text import Paste, cudnn_version
from cudamatrix.models import Driver, Environment, GpuInfo, Library, Note, Toolkit
from cudamatrix.pastes.merge import merge_driver, merge_gpus
from cudamatrix.schema import normalize_cc

_EMPTY = {"", "could not collect", "n/a", "none", "no cuda", "unknown", "not found", "not available"}
_LEADING_VERSION = re.compile(r"\d{1,4}(?:\.\d{1,9}){1,3}")
_ANY_VERSION = re.compile(r"(?<![\d.])\d{1,4}(?:\.\d{1,9}){1,3}")
_DIST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,80}")
_PATHLIKE = re.compile(r"(?:/|[A-Za-z]:\\)")

# label (lower case, spaces collapsed, without a trailing "(e.g., ...)") -> the fact it carries
LABELS = {
    "pytorch version": "torch", "pytorch": "torch", "torch version": "torch", "torch": "torch",
    "cuda used to build pytorch": "torch_cuda", "python version": "python", "python": "python",
    "python platform": "platform", "os": "os", "cuda runtime version": "runtime",
    "gpu models and configuration": "gpus", "nvidia driver version": "driver", "cuda driver version": "driver",
    "cudnn version": "cudnn", "cuda/cudnn version": "cuda_cudnn", "vllm version": "pkg:vllm",
    "vllm": "pkg:vllm", "sglang": "pkg:sglang", "jax": "pkg:jax", "jaxlib": "pkg:jaxlib",
    "tensorflow version": "pkg:tensorflow", "tensorflow": "pkg:tensorflow", "numpy": "pkg:numpy",
    "numpy version": "pkg:numpy", "transformers version": "pkg:transformers",
    "is debug build": "", "rocm used to build pytorch": "", "gcc version": "", "clang version": "",
    "cmake version": "", "libc version": "", "is cuda available": "", "cuda_module_loading set to": "",
    "hip runtime version": "", "miopen runtime version": "", "is xnnpack available": "", "is xpu available": "",
    "cpu": "", "versions of relevant libraries": "", "collecting environment information...": "",
    "cuda available": "", "cuda_home": "", "nvcc": "", "rocm version": "", "neuron sdk version": "",
    "vllm build flags": "", "gpu topology": "", "process_count": "", "jax.devices": "", "platform": "", "cuda version": "",
    "how you installed pytorch": "", "build command you used": "", "any other relevant information": "",
    "pytorch version (gpu?)": "torch", "tensorflow version (gpu?)": "pkg:tensorflow",
    # issue templates' own words
    "gpu": "gpus", "gpus": "gpus", "nvidia gpu": "gpus", "gpu model": "gpus", "gpu models": "gpus",
    "gpu model and memory": "gpus", "gpu/vram": "gpus", "driver": "driver", "nvidia driver": "driver",
    "driver version": "driver", "operating system": "os", "os platform and distribution": "os",
    "jax version": "pkg:jax", "jaxlib version": "pkg:jaxlib",
    # the packages built against one torch, as users type their versions beside an extension's load error
    "flash-attn": "pkg:flash-attn", "flash_attn": "pkg:flash-attn", "flash attention": "pkg:flash-attn",
    "xformers": "pkg:xformers", "onnxruntime-gpu": "pkg:onnxruntime-gpu", "onnxruntime": "pkg:onnxruntime",
    "torch-scatter": "pkg:torch-scatter", "torch_scatter": "pkg:torch-scatter", "cupy": "pkg:cupy",
}
_EXTENSION_LABELS = {"flash-attn", "flash_attn", "flash attention", "xformers", "onnxruntime-gpu", "torch-scatter",
                     "torch_scatter"}
_MARKERS = ("collecting environment information", "versions of relevant libraries")


def _label(body: str, wide_colons: bool = True) -> tuple[str, str] | None:
    """("pytorch version", "1.5.0") from "PyTorch version: 1.5.0", "- PyTorch Version (e.g., 1.0): 1.5.0",
    "PyTorch version 1.5.0" or "GPU 0：TITAN RTX"; None for a line that is no field. ``wide_colons``: whether
    the text may hold a full-width colon at all (a paste without one spares a search per line)."""
    if body[:2] in ("- ", "* "):
        body = body[2:].lstrip()
    colon = _colon(body, wide_colons)
    if colon < 0:
        if body[:16].lower() == "pytorch version " and _LEADING_VERSION.match(body[16:].strip()):
            return "pytorch version", body[16:].strip()
        name, eq, version = body[:120].partition("==")  # a list item typed as a pin: "- TensorFlow==2.3."
        if eq and LABELS.get(name.strip().lower(), "").startswith("pkg:") and _LEADING_VERSION.match(version):
            return name.strip().lower(), version.strip().rstrip(".")
        return None
    return _normal(body[:colon].rstrip().lower()), body[colon + 1:].strip()


def _colon(body: str, wide_colons: bool) -> int:
    """Where the label ends: the first colon (or full-width colon) in the first 80 characters; -1 for none."""
    head = body[:81]
    if wide_colons:  # one character for another: the first of either is where the label ends
        head = head.replace("\uff1a", ":")
    return head.find(":")


def _normal(label: str) -> str:
    """A label as :data:`LABELS` spells it: Markdown bold and code taken off, blanks collapsed, a trailing
    "(e.g., ...)" dropped."""
    # no label of LABELS holds Markdown or a run of blanks: these two leave one of them as it is
    if "*" in label or "`" in label:
        label = label.replace("*", "").replace("`", "").strip()
    if "  " in label or "\t" in label:
        label = " ".join(label.split())
    if label.endswith(")") and "(" in label and label not in LABELS:
        label = label[:label.index("(")].rstrip()
    return label


def _value(v: str) -> str | None:
    v = v.strip().strip("'\"`")
    return None if v.lower() in _EMPTY else v


_LINK = re.compile(r"\[([^\]\n]{0,200})\]\([^)\n]{0,500}\)")
_DRIVER_IN = re.compile(r"driver(?: version)?[ :=]{1,3}v?(\d{2,4}\.\d{1,3}(?:\.\d{1,3})?)", re.IGNORECASE)


def demark(value: str) -> str:
    """A value without the Markdown around and inside it: inline code, bold, links ("[text](url)" -> "text")."""
    if "`" in value:
        value = value.replace("`", "")
    if "**" in value:
        value = value.replace("**", "")
    if "](" in value:
        value = _LINK.sub(r"\1", value)
    return value.strip()


_GPU_WORDS = re.compile(r"RTX|GTX|NVIDIA|Tesla|Quadro|TITAN|GeForce|\b[ABHKLPTV]\d{1,3}\b")


def _pkg_version(value: str) -> tuple[str | None, str] | None:
    """(a distribution name the value names, its version) of a package field's value: "2.5.1+cu121",
    "tensorflow-gpu==1.15.0", "TF 2.11", "v0.4.30"; None without a version."""
    shown = _value(value)
    if not shown:
        return None
    name, eq, version = shown.partition("==")
    if eq and _DIST.fullmatch(name.strip()) and _leading_version(version):  # fullmatch: at most 81 long
        return name.strip(), version.split()[0]
    if _leading_version(shown):
        return None, shown.split()[0]
    whole = next((w for w in shown.split()[:4] if _LEADING_VERSION.fullmatch(w)), None)
    if whole:  # "v2.13.0-rc2-7-g1cb1a030a62 2.13.0" (TensorFlow's template asks for both)
        return None, whole
    found = _ANY_VERSION.search(shown[:40])
    if found and found.start() <= 12 and not any(c.isdigit() for c in shown[:found.start()]):
        return None, shown[found.start():].split()[0]  # "TF 2.11", "v2.1.0"
    return None


def _gpu_value(value: str) -> GpuInfo | None:
    """A GPU field's value: "GPU 0: NAME (UUID: ...)", or a name with a compute capability in parentheses
    ("NVIDIA GeForce RTX 5090 (SM_120)") or its memory after a slash ("RTX 5090 / 32GB")."""
    g = gpu_line(value)
    if g is not None:
        return g
    name = _value(value.split(" / ")[0])
    if not name:
        return None
    cc = None
    if name.endswith(")") and "(" in name:  # "(SM_120)"
        cc = _sm(name[name.rfind("(") + 1:-1].strip().lower())
        name = name[:name.rfind("(")].strip() if cc else name
    name, memory = memory_suffix(name)
    return GpuInfo(index=0, name=name, compute_capability=cc, memory_total_mib=memory)  # _apply_gpus: its source


def memory_suffix(name: str) -> tuple[str, int | None]:
    """A GPU name without the memory people write after it, and that memory in MiB: "NVIDIA GeForce GTX 960M,
    4096MiB", "RTX 5090 32GB", "A100 SXM4(40G)", "RTX 3090 (24 GB)", "RTX 4090 [24GB]" (GB and G as GiB)."""
    text = name.strip()
    head, comma, tail = text.rpartition(", ")
    if comma:
        mib = _mib(tail)
        if mib:
            return head.strip(), mib
    if text.endswith((")", "]")):
        at = text.rfind("(" if text.endswith(")") else "[")
        mib = _mib(text[at + 1:-1]) if at > 0 else None
        if mib:
            return text[:at].strip(), mib
    head, _, last = text.rpartition(" ")
    mib = _mib(last) if head else None
    if mib is None and head:  # "RTX 3090 24 GB"
        before, _, number = head.rpartition(" ")
        mib = _mib(number + last) if before and last.upper() in ("GB", "G", "MIB", "GIB") else None
        head = before if mib else head
    return (head.strip(), mib) if mib else (text, None)


def _mib(text: str) -> int | None:
    """"4096MiB" -> 4096, "32GB" / "32 GB" / "40G" / "24GiB" -> 32768 / ... ; None for anything else."""
    t = text.replace(" ", "").upper()
    for unit, factor in (("MIB", 1), ("MB", 1), ("GIB", 1024), ("GB", 1024), ("G", 1024)):
        if t.endswith(unit) and t[:-len(unit)].isdigit() and 0 < len(t) - len(unit) <= 6:
            value = int(t[:-len(unit)]) * factor
            return value if 512 <= value <= 1 << 21 else None
    return None


def _sm(text: str) -> str | None:
    """"sm_120" -> "12.0"; None when it is no compute capability."""
    digits = text[3:] if text.startswith("sm_") else ""
    return normalize_cc(text) if digits.isdigit() and 2 <= len(digits) <= 3 else None


def _leading_version(v: str | None) -> str | None:
    m = _LEADING_VERSION.match(v.strip()) if v else None  # anchored, at most 34 characters: no cut needed
    return m.group(0) if m else None


def _first_version(text: str) -> str | None:
    """The first dotted version in a short text ("cudnn 7.6.0" -> "7.6.0")."""
    m = _ANY_VERSION.search(text[:120])
    return m.group(0) if m else None


def _gpu_indices(label: str) -> list[int] | None:
    """"gpu 0" -> [0]; "gpu 0,1,2" and "gpu 0,1,2 compute capability" -> [0, 1, 2] (SGLang's check_env)."""
    if not label.startswith("gpu ") or len(label) > 80:
        return None
    label = label[:-len(" compute capability")] if label.endswith(" compute capability") else label
    parts = label[4:].replace(" ", "").split(",")
    return [int(p) for p in parts] if all(p.isdigit() for p in parts) else None


class _Facts:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.packages: dict[str, str] = {}
        self.cudnn_paths: list[str] = []
        self.gpus: list[GpuInfo] = []
        self.cc: dict[int, str] = {}
        self.labels: set[str] = set()
        self.sglang_lines: list[int] = []
        self.read_as: dict[str, tuple[str, str] | None] = {}  # a line's text -> _label's reading of it (logs repeat)


def read(paste: Paste, env: Environment) -> bool:
    """Read every labelled field of the paste; the block kind follows from the labels seen."""
    facts = _Facts()
    claimed: list[int] = []
    consumed: set[int] = set()
    kinds = paste.kind
    wide = "\uff1a" in paste.text
    for i in paste.having(":", "\uff1a", "PyTorch version", "Collecting environment", "=="):
        if kinds[i] is None and i not in consumed:
            _line(paste, facts, i, wide, claimed, consumed)
    if "### " in paste.text:
        _headings(paste, facts, claimed, consumed)
    if "sglang" in facts.labels:
        _sglang_packages(paste, facts, claimed)
    if not _enough(facts):
        return False
    kind = _kind(facts)
    paste.claim_all(claimed, kind)
    _fill_region(paste, claimed, kind)
    _apply(facts, env, kind)
    return True


def _line(paste: Paste, facts: _Facts, i: int, wide: bool, claimed: list[int], consumed: set[int]) -> None:
    """Read line ``i`` if it is a field (a marker line, a GPU line, a label of :data:`LABELS`)."""
    body = paste.lines[i].strip()
    if body[:1] in "CcVv" and body[:40].lower().startswith(_MARKERS):
        facts.labels.add("marker")
        claimed.append(i)
        return
    if ": undefined symbol: " in body:  # the loader's error naming a file, no field (pastes/extensions.py)
        return
    if body in facts.read_as:
        lv = facts.read_as[body]
    else:
        lv = facts.read_as[body] = _label(body, wide)
    if lv is None:
        return
    label, value = lv
    if label in LABELS or label[:4] == "gpu ":
        _labelled(paste, facts, i, label, value, claimed, consumed)
    elif facts.labels and _wordlike(label):
        claimed.append(i)  # another field of a block already recognised (CPU flags, env variables)


# a label of letters and digits (str.isalnum's, which re's \w is with "_") between blanks, dots, dashes, underscores
_WORDLIKE = re.compile(r"[ ._-]*[^\W_][\w .-]*")


def _wordlike(label: str) -> bool:
    """Whether a label is words and digits between blanks, dashes, underscores and dots ("cuda_visible_devices")."""
    return _WORDLIKE.fullmatch(label) is not None


def _labelled(paste: Paste, facts: _Facts, i: int, label: str, value: str, claimed: list[int],
              consumed: set[int]) -> None:
    """A line whose label is a GPU's ("GPU 0: ...") or one of :data:`LABELS`."""
    gpu_idx = _gpu_indices(label)
    if gpu_idx is not None:
        _gpu_field(facts, label, gpu_idx, value)
        claimed.append(i)
        return
    fact = LABELS.get(label)
    if fact is None:
        if facts.labels and _wordlike(label):
            claimed.append(i)
        return
    facts.labels.add(label)
    claimed.append(i)
    if "river" in value and label not in _DRIVER_LABELS:  # "(driver 570.124.06)" said in another field's value
        said = _DRIVER_IN.search(value[:200])
        if said:
            facts.values.setdefault("driver", said.group(1))
    if fact:  # else a field that carries nothing read here (gcc version, CPU, ...)
        _fact(paste, facts, i, label, fact, value, claimed, consumed)


_DRIVER_LABELS = ("nvidia driver version", "cuda driver version", "driver", "nvidia driver", "driver version")


def _headings(paste: Paste, facts: _Facts, claimed: list[int], consumed: set[int]) -> None:
    """Issue templates that put each label in a Markdown heading and its value on the next non-blank line
    ("### TensorFlow version" / "" / "TF 2.11")."""
    lines = paste.lines
    for i in paste.having("### "):
        body = lines[i].strip()
        label = _normal(body.lstrip("#").strip().lower()) if body.startswith("### ") else ""
        fact = LABELS.get(label)
        if not fact or not paste.free(i):
            continue
        j = next((k for k in range(i + 1, min(i + 4, len(lines))) if lines[k].strip()), None)
        if j is None or lines[j].lstrip().startswith("#") or not paste.free(j):
            continue
        facts.labels.add(label)
        claimed += [i, j]
        consumed.add(j)
        value = lines[j].strip()
        if "river" in value and label not in _DRIVER_LABELS:  # "cuDNN: Driver Version: 561.17" typed there
            said = _DRIVER_IN.search(value[:200])
            if said:
                facts.values.setdefault("driver", said.group(1))
        _fact(paste, facts, j, label, fact, value, claimed, consumed)


def _fact(paste: Paste, facts: _Facts, i: int, label: str, fact: str, value: str, claimed: list[int],
          consumed: set[int]) -> None:
    """Keep the fact a field carries (the first value of a label wins); the value is read without its Markdown."""
    if label == "sglang":
        facts.sglang_lines.append(i)
    value = demark(value)
    if fact == "cudnn":
        _cudnn_field(paste, facts, i, value, claimed, consumed)
    elif fact == "gpus" and value:
        g = _gpu_value(value)
        if g is not None:
            facts.gpus.append(g)
            if g.name and _GPU_WORDS.search(g.name[:80]):
                facts.labels.add("gpu name")  # a template's "GPU: RTX 5090" is as telling as collect_env's
    elif fact.startswith("pkg:"):
        named = _pkg_version(value)
        if named:
            facts.packages[named[0] or fact[4:]] = named[1]
    elif fact not in facts.values and (shown := _value(value)):
        facts.values[fact] = shown


def _cudnn_field(paste: Paste, facts: _Facts, i: int, value: str, claimed: list[int], consumed: set[int]) -> None:
    """"cuDNN version: ..." and, below it, "Probably one of the following:" and one path a line."""
    lines = paste.lines
    if value:
        facts.cudnn_paths.append(value)
    j = i + 1
    while j < len(lines) and _PATHLIKE.match(lines[j].strip()) and paste.free(j):
        facts.cudnn_paths.append(lines[j].strip())
        claimed.append(j)
        consumed.add(j)
        j += 1


def _gpu_field(facts: _Facts, label: str, indices: list[int], value: str) -> None:
    facts.labels.add("gpu index")
    if label.endswith("compute capability"):
        cc = _leading_version(value)
        if cc:
            for idx in indices:
                facts.cc[idx] = cc
        return
    name = value.strip()
    if name.endswith(")") and "(UUID:" in name:
        name = name[:name.rfind("(UUID:")].strip()
    if _value(name):
        for idx in indices:
            facts.gpus.append(GpuInfo(index=idx, name=name))  # its source set by _apply_gpus


def _sglang_packages(paste: Paste, facts: _Facts, claimed: list[int]) -> None:
    """SGLang's check_env lists "name: version" for each package it cares about, in the block of "name: value"
    lines around its "sglang:" line."""
    lines = paste.lines
    end = -1
    for s in facts.sglang_lines:  # in order; one inside the block just read has the same block
        if s <= end:
            continue
        start = end = s
        while start > 0 and ":" in lines[start - 1] and paste.free(start - 1):
            start -= 1
        while end + 1 < len(lines) and ":" in lines[end + 1] and paste.free(end + 1):
            end += 1
        for i in range(start, end + 1):
            lv = _label(lines[i].strip())
            if lv and _DIST.fullmatch(lv[0]) and _leading_version(lv[1]) and " " not in lv[1].strip():
                facts.packages.setdefault(canonical(lv[0]), lv[1].strip())
                claimed.append(i)


def _enough(facts: _Facts) -> bool:
    """Whether the labels seen make a block: a collect_env marker line, a label only an environment report
    prints, or three labels (a GPU index label does not count)."""
    if "marker" in facts.labels:
        return True
    real = facts.labels - {"gpu index"}
    strong = {"pytorch version", "cuda used to build pytorch", "gpu models and configuration", "nvidia driver version",
              "cudnn version", "jaxlib", "sglang", "vllm version", "python platform", "is cuda available",
              "cuda runtime version", "cuda/cudnn version", "pytorch version (gpu?)", "gpu name", "pytorch",
              "torch version"}
    return bool(real & strong) or len(real) >= 3 or bool(real & _EXTENSION_LABELS and len(real) >= 2)


def _kind(facts: _Facts) -> str:
    if "sglang" in facts.labels:
        return "sglang check_env"
    if "jaxlib" in facts.labels and "jax" in facts.labels:
        return "jax.print_environment_info"
    if "vllm version" in facts.labels:
        return "collect_env (vLLM)"
    if "marker" in facts.labels or {"cuda used to build pytorch", "is debug build"} & facts.labels:
        return "collect_env"
    return "environment fields"


def _fill_region(paste: Paste, claimed: list[int], kind: str) -> None:
    """Lines between the first and last field of a collect_env block belong to it (banners, section titles,
    CPU flags, topology tables), and so does the paragraph that ends it."""
    if not claimed or not kind.startswith("collect_env"):
        return
    first, last = min(claimed), max(claimed)
    while last + 1 < len(paste.lines) and paste.lines[last + 1].strip() and paste.free(last + 1):
        last += 1
    for i in range(first, last + 1):
        if paste.lines[i].strip() and paste.free(i) and i not in paste.commands:
            paste.claim(i, kind)


def _apply(facts: _Facts, env: Environment, kind: str) -> None:
    v = facts.values
    source = "report:" + kind.split()[0]
    built = v.get("torch_cuda")
    if v.get("cuda_cudnn") and not built:  # "10.1 / 7.6.5", "cuda 10 /  cudnn 7.6.0", "CUDA 9.0 cuDNN 7.0.5"
        built = _split_cuda_cudnn(v["cuda_cudnn"], facts)
    torch = _leading_version(v.get("torch")) and v["torch"].split()[0]
    if torch:
        _apply_torch(env, facts, torch, built, source)
    pyv = _leading_version(v.get("python"))
    if pyv and env.python.version is None:
        env.python.version = pyv
    _platform(env, v.get("python"), v.get("platform") or "", v.get("os") or "")
    # the first version in the value: the leading one when there is one ("470.94"), else "NVIDIA-Linux-x86_64-470.94.run"'s
    drv = _first_version(v.get("driver") or "")
    if drv:
        merge_driver(env, Driver(version=drv, source=source))
    runtime = _leading_version(v.get("runtime"))
    if runtime:
        env.toolkits.append(Toolkit(source=source, version=runtime))
    if v.get("cudatoolkit"):
        env.toolkits.append(Toolkit(source=f"{source} cudatoolkit", version=v["cudatoolkit"]))
    for path in facts.cudnn_paths:
        _cudnn(env, path, source)
    _apply_gpus(env, facts, source)
    for name, version in facts.packages.items():
        env.packages.setdefault(canonical(name), version)


def _split_cuda_cudnn(text: str, facts: _Facts) -> str | None:
    """A "CUDA/cuDNN version" value: the CUDA version it names (returned) and its cuDNN (kept with the cuDNN
    paths)."""
    low = text[:120].lower()
    conda = low.find("cudatoolkit=")  # "cudatoolkit=11.2.2 cudnn=8.1.0.77": conda's package pins, typed
    if conda >= 0 and _leading_version(low[conda + 12:]):
        facts.values.setdefault("cudatoolkit", _leading_version(low[conda + 12:]) or "")
    at = low.find("cudnn")
    cuda_part, cudnn_part = (low[:at], low[at:]) if at >= 0 else (low.split("/")[0], "/".join(low.split("/")[1:]))
    cudnn_v = _first_version(cudnn_part)
    if cudnn_v:
        facts.cudnn_paths.append(cudnn_v)
    return _first_version(cuda_part)


def _apply_torch(env: Environment, facts: _Facts, torch: str, built: str | None, source: str) -> None:
    """torch's build from its version and "CUDA used to build PyTorch" (a collect_env that names no CUDA there
    describes a CPU build)."""
    fw = torch_variant(torch, [], None)
    fw.source = source
    short = _leading_version(built)
    if short:
        mm = ".".join(short.split(".")[:2])
        fw.cuda = fw.cuda or mm
        fw.variant = fw.variant or "cu" + mm.replace(".", "")
    elif fw.variant is None and built is None and "cuda used to build pytorch" in facts.labels:  # none named there
        fw.variant = "cpu"
    env.frameworks = [f for f in env.frameworks if f.name != "torch"] + [fw]
    env.packages.setdefault("torch", torch)


def _apply_gpus(env: Environment, facts: _Facts, source: str) -> None:
    for g in facts.gpus:
        g.source = source
    for idx, cc in facts.cc.items():
        facts.gpus.append(GpuInfo(index=idx, compute_capability=cc, source=source))
    if facts.gpus:
        merge_gpus(env, facts.gpus)


def _cudnn(env: Environment, text: str, source: str) -> None:
    text = text.strip()  # collect_env's "Probably one of the following:" holds no path or version: nothing read
    base = re.split(r"[\\/]", text)[-1]
    if _PATHLIKE.match(text):
        name = library_name(base)
        if name == "cudnn" or base.lower().startswith("cudnn") and base.lower().endswith(".dll"):
            env.libraries.append(Library(name="cudnn", soname=_soname_guess(base) if name else base, path=text,
                                         origin=source, version=version_from_filename(base)))
        return
    if "/" in text:  # "8.0.4/8.0.3/7.6.5": several copies named, the first as the framework's
        for more in text.split("/")[1:]:
            if _leading_version(more.strip()):
                env.notes.append(_note(f"cuDNN {_leading_version(more.strip())} named in the paste, of no "
                                       "framework it could be tied to"))
        text = text.split("/")[0].strip()
    version = _leading_version(text)
    if version is None and text.isdigit() and len(text) <= 6:  # torch.backends.cudnn.version() style: 8902

        version = cudnn_version(int(text))
    if version:
        torch = next((f for f in env.frameworks if f.name == "torch"), None)
        if torch is not None and torch.cudnn is None:
            torch.cudnn = version
        else:
            env.notes.append(_note(f"cuDNN {version} named in the paste, of no framework it could be tied to"))


def _note(message: str):
    return Note("report", message)


_LINUX_NAMES = ("Linux", "Ubuntu", "CentOS", "Debian", "Red Hat", "Rocky")


def _platform(env: Environment, pyv: str | None, plat: str, osname: str) -> None:
    """The operating system and the Python platform tag from "Python platform" and "OS"."""
    if "Windows" in osname or plat.startswith("Windows"):
        env.context.os = "windows"
        env.python.platform = "win_amd64" if "64" in (pyv or "") + plat or not plat else None
    elif plat.startswith("Linux") or any(name in osname for name in _LINUX_NAMES):
        env.context.os = "linux"
        arch = "aarch64" if "aarch64" in plat + osname else ("x86_64" if "x86_64" in plat + osname else None)
        env.python.platform = f"linux_{arch}" if arch else env.python.platform
        if "microsoft" in plat.lower() or "WSL" in plat:
            env.context.wsl = True
    elif "macOS" in osname or "Mac OSX" in osname or plat.startswith("macOS"):
        env.context.os = "darwin"
