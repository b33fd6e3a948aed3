"""What users print from Python: ``torch.__version__``, ``torch.version.cuda``, ``torch.backends.cudnn.version()``,
``torch.cuda.get_device_name()``, ``tf.__version__``, ``jax.__version__`` (at a ``>>>`` prompt, through
``python -c``, or as "torch.__version__ = 2.1.0"), and ``tf.sysconfig.get_build_info()``."""
from __future__ import annotations

import re

from cudamatrix.detect.python_env import torch_variant
from cudamatrix.detect.text import Paste, cudnn_version
from cudamatrix.models import Environment, Framework, GpuInfo
from cudamatrix.pastes.merge import merge_gpus

_EXPR = re.compile(r"torch\.__version__|torch\.version\.cuda|torch\.backends\.cudnn\.version\(\)|"
                   r"torch\.cuda\.get_device_name\([^()\n]{0,20}\)|torch\.cuda\.is_available\(\)|"
                   r"torch\.cuda\.device_count\(\)|(?:tf|tensorflow)\.__version__|jax\.__version__|"
                   r"jaxlib\.__version__|sys\.version|platform\.python_version\(\)")
_KEYS = {"torch.__version__": "torch", "torch.version.cuda": "torch_cuda", "torch.backends.cudnn.version()": "cudnn",
         "tf.__version__": "tensorflow", "tensorflow.__version__": "tensorflow", "jax.__version__": "jax",
         "jaxlib.__version__": "jaxlib", "sys.version": "python", "platform.python_version()": "python"}
_BUILD_KEY = re.compile(r"'(cuda_version|cudnn_version)'[,:] {0,4}'([^'\n]{1,40})'")
_VERSIONISH = re.compile(r"\d{1,4}(?:\.\d{1,9}){0,3}(?:[+.]?[\w.]{1,40})?")


def _key(expr: str) -> str | None:
    if expr.startswith("torch.cuda.get_device_name"):
        return "gpu"
    return _KEYS.get(expr)


def read(paste: Paste, env: Environment, state: dict) -> bool:
    """Values printed for the expressions above; TensorFlow's build info waits in ``state["tf_build"]`` until
    the TensorFlow version is known."""
    values: dict[str, str] = {}
    lines = paste.lines
    for i in paste.having("__version__", "torch.", "sys.version", "python_version"):
        exprs = [m.group(0) for m in _EXPR.finditer(lines[i][:2000])]
        if not exprs:
            continue
        if i in paste.commands or lines[i].lstrip().startswith(("python", "print(")):
            _command_outputs(paste, i, exprs, values)
        elif len(exprs) == 1 and paste.free(i):  # "torch.__version__ = 2.1.0", "torch.version.cuda: 12.1"
            _inline_value(paste, i, exprs[0], values)
    _python_version(paste, values)
    if "python" not in values:
        _python_answer(paste, values)
    build = _build_info(paste)
    if not values and not build:
        return False
    _apply(env, values)
    if build:
        state.setdefault("tf_build", {}).update({k: v for k, v in build.items() if v})
    return True


def _python_version(paste: Paste, values: dict[str, str]) -> None:
    """`python3 --version` prints "Python 3.12.1"; `python3` alone starts the interpreter, whose banner begins
    "Python 3.9.12 (main, Apr  5 2022, 06:56:58)" and goes on with the compiler and the "Type "help"" line."""
    lines = paste.lines
    for i in sorted(paste.commands):
        if lines[i].lstrip().startswith("python") and i + 1 < len(lines):
            answer = lines[i + 1].strip()
            if answer.startswith("Python ") and _take(values, "python", answer[7:].split(" (")[0]):
                paste.claim(i + 1, "python prints")
                _claim_banner(paste, i + 2)


def _python_answer(paste: Paste, values: dict[str, str]) -> None:
    """A line that is `python --version`'s answer on its own: "Python 3.6.10" or "Python 3.6.10 :: Anaconda, Inc."."""
    for i in paste.having("Python 3.", "Python 2."):
        body = paste.lines[i].strip()
        version, _, rest = body[7:].partition(" ")
        if body.startswith("Python ") and (not rest or rest.startswith(":: ")) and paste.free(i) and \
                _VERSIONISH.fullmatch(version) and _take(values, "python", version):
            paste.claim(i, "python prints")


def _claim_banner(paste: Paste, j: int) -> None:
    """The interpreter banner's lines after its first."""
    for k in range(j, min(j + 2, len(paste.lines))):
        body = paste.lines[k].strip()
        if body.startswith("[") or body.startswith("Type \"help\""):
            paste.claim(k, "python prints")


def _command_outputs(paste: Paste, i: int, exprs: list[str], values: dict[str, str]) -> None:
    """A command printing ``exprs``: one output line per expression, or all of them on one line."""
    lines = paste.lines
    outs = _outputs(paste, i)
    if len(outs) == len(exprs):
        found = [lines[j].strip() for j in outs]
    elif len(outs) >= 1 and len(lines[outs[0]].split()) == len(exprs) and "gpu" not in map(_key, exprs):
        found, outs = lines[outs[0]].split(), outs[:1]
    else:
        return
    for k, expr in enumerate(exprs):  # one value found per expression: both branches checked the counts
        _take(values, _key(expr), found[k])
    for j in outs:
        paste.claim(j, "python prints")


def _inline_value(paste: Paste, i: int, expr: str, values: dict[str, str]) -> None:
    """"torch.__version__ = 2.1.0", "torch.version.cuda: 12.1", "torch.__version__ is 2.1.0"."""
    line = paste.lines[i]
    rest = line[line.find(expr) + len(expr):].strip()
    if rest[:1] in (":", "=") or rest.startswith(("is ", "->")):
        value = rest.lstrip(":=->").strip()
        value = value[3:] if value.startswith("is ") else value
        if _take(values, _key(expr), value):
            paste.claim(i, "python prints")


def _outputs(paste: Paste, i: int) -> list[int]:
    """The output lines after command line ``i``: up to the next command, a blank line or 8 lines."""
    out = []
    for j in range(i + 1, min(len(paste.lines), i + 9)):
        if j in paste.commands or not paste.lines[j].strip():
            break
        out.append(j)
    return out


def _take(values: dict[str, str], key: str | None, value: str) -> bool:
    value = value.strip().strip("'\"")
    if key is None or not value:
        return False
    if key == "gpu" or (key == "torch_cuda" and value == "None"):  # a CPU build's torch.version.cuda is None
        values.setdefault(key, value)
        return True
    m = _VERSIONISH.match(value)  # anchored, and bounded (at most 75 characters): no cut of a long value needed
    if not m:
        return False
    values.setdefault(key, m.group(0))
    return True


def _build_info(paste: Paste) -> dict[str, str]:
    """``tf.sysconfig.get_build_info()``: an OrderedDict or dict with 'cuda_version' and 'cudnn_version'."""
    out: dict[str, str] = {}
    for i in paste.having("'cuda_version'", "'cudnn_version'"):
        line = paste.lines[i]
        for m in _BUILD_KEY.finditer(line[:20000]):
            value = m.group(2)
            if value.startswith("64_"):  # Windows builds: '64_112' is CUDA 11.2, '64_8' cuDNN 8
                digits = value[3:]
                value = digits if m.group(1) == "cudnn_version" else f"{digits[:-1]}.{digits[-1:]}"
            out.setdefault(m.group(1), value)
        paste.claim(i, "tf.sysconfig.get_build_info()")
        _claim_pretty_printed(paste, i)
    return out


def _claim_pretty_printed(paste: Paste, i: int) -> None:
    """A pretty-printed build info spans lines: claim from its "OrderedDict([" (or "{") to its "])" (or "}")."""
    lines = paste.lines
    start = i
    while start > 0 and i - start < 60 and not lines[start].lstrip().startswith(("OrderedDict(", "{")):
        start -= 1
    end = i
    while end + 1 < len(lines) and end - i < 60 and not lines[end].rstrip().endswith(("])", "}")):
        end += 1
    if lines[start].lstrip().startswith(("OrderedDict(", "{")) and lines[end].rstrip().endswith(("])", "}")):
        paste.claim_range(start, end, "tf.sysconfig.get_build_info()")


def _apply(env: Environment, values: dict[str, str]) -> None:
    if "torch" in values:
        fw = torch_variant(values["torch"], [], None)
        fw.source = "report:python"
        cuda = values.get("torch_cuda")
        if cuda and cuda[0].isdigit():
            mm = ".".join(cuda.split(".")[:2])
            fw.cuda = fw.cuda or mm
            fw.variant = fw.variant or "cu" + mm.replace(".", "")
        elif cuda == "None" and fw.variant is None:
            fw.variant = "cpu"
        if values.get("cudnn", "").isdigit():
            fw.cudnn = cudnn_version(int(values["cudnn"]))
        env.frameworks = [f for f in env.frameworks if f.name != "torch"] + [fw]
        env.packages.setdefault("torch", values["torch"])
    for name in ("tensorflow", "jax", "jaxlib"):
        if name in values:
            env.packages.setdefault(name, values[name])
    if values.get("python") and env.python.version is None:
        env.python.version = values["python"].split()[0]
    if values.get("gpu"):
        merge_gpus(env, [GpuInfo(index=0, name=values["gpu"], source="report:python")])


def apply_tf_build(env: Environment, build: dict[str, str]) -> bool:
    """Tie ``tf.sysconfig.get_build_info()``'s CUDA and cuDNN to the TensorFlow the paste names; False without one."""
    fw = next((f for f in env.frameworks if f.name.startswith("tensorflow")), None)
    if fw is None:
        version = env.packages.get("tensorflow") or env.packages.get("tensorflow-gpu")
        if not version:
            return False
        fw = Framework(name="tensorflow", version=version, source="report:tf build info")
        env.frameworks.append(fw)
    fw.cuda = fw.cuda or build.get("cuda_version")
    fw.cudnn = fw.cudnn or build.get("cudnn_version")
    return True
