"""The verification child: run as a script in the interpreter being checked (which need not have
cudamatrix installed), so that a crash, a hang or a segfault of the framework is a result, not ours.

Usage: ``python child.py FRAMEWORK GPU_EXPECTED``. Writes JSON lines prefixed with
``CUDAMATRIX-VERIFY`` on stdout: one per stage reached (so a parent can tell where a crash
happened), the last one the result. Standard library only outside the framework itself.
"""
import os
import sys

# A script's folder comes first on sys.path: ours holds modules (errors, plan, ...) that must not
# shadow anything the framework imports.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import ctypes  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

T0 = time.perf_counter()
MARK = "CUDAMATRIX-VERIFY "
# the libraries of the CUDA stack worth naming in a report (as mapped into this process)
LIB_RE = re.compile(r"/(lib(cuda|cudart|cublas|cublasLt|cudnn\w*|nvrtc\w*|nvJitLink|cufft|curand|cusparse\w*|cusolver\w*"
                    r"|nccl|nvidia-ml|xla\w*|tensorflow_framework)\.so[.\d]*)$")
# a tolerance for fp32 with TF32 off: cuDNN and the CPU sum in different orders
RTOL = 1e-4
ATOL = 1e-4

# shapes: small enough for the pure-Python reference, large enough to take a real cuDNN path on the GPU
N, C, H, W, K, R = 2, 3, 9, 9, 4, 3
GN, GC, GH, GW, GK = 8, 16, 32, 32, 32


def emit(**fields):
    fields["elapsed_s"] = round(time.perf_counter() - T0, 4)
    sys.stdout.write(MARK + json.dumps(fields) + "\n")
    sys.stdout.flush()


def reference_conv(x, w):
    """Naive 2-D convolution (cross-correlation, stride 1, no padding) on nested lists, NCHW / KCRS."""
    n_, c_, h_, w_ = len(x), len(x[0]), len(x[0][0]), len(x[0][0][0])
    k_, r_ = len(w), len(w[0][0])
    out = []
    for n in range(n_):
        planes = []
        for k in range(k_):
            rows = []
            for i in range(h_ - r_ + 1):
                row = []
                for j in range(w_ - r_ + 1):
                    s = 0.0
                    for c in range(c_):
                        xc, wc = x[n][c], w[k][c]
                        for a in range(r_):
                            xr, wr = xc[i + a], wc[a]
                            for b in range(r_):
                                s += xr[j + b] * wr[b]
                    row.append(s)
                rows.append(row)
            planes.append(rows)
        out.append(planes)
    return out


def nested(shape, rng):
    if len(shape) == 1:
        return [rng.uniform(-1.0, 1.0) for _ in range(shape[0])]
    return [nested(shape[1:], rng) for _ in range(shape[0])]


def max_err(a, b):
    if isinstance(a, list):
        return max(max_err(p, q) for p, q in zip(a, b))
    return abs(a - b)


def max_abs(a):
    if isinstance(a, list):
        return max(max_abs(p) for p in a)
    return abs(a)


def mapped_libraries():
    """CUDA-stack libraries mapped into this process (/proc/self/maps), each with its own version."""
    seen = {}
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    path = parts[5].strip()
                    m = LIB_RE.search(path)
                    if m and path not in seen:
                        version, source = _lib_version(path, m.group(1))
                        seen[path] = {"path": path, "file": m.group(1), "version": version,
                                      "version_source": source}
    except OSError:
        pass
    return list(seen.values())


def mapped_files():
    """Every shared object file mapped into this process (/proc/self/maps), in first-seen order: what the
    parent compares with the loader model's prediction."""
    seen = {}  # type: dict[str, None]
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/") and ".so" in os.path.basename(parts[5]):
                    seen.setdefault(parts[5].strip(), None)
    except OSError:
        pass
    return list(seen)


def lib_version(path, name):
    """The library's own answer (cudnnGetVersion, cudaRuntimeGetVersion ...), else its wheel's, else the
    file name's."""
    return _lib_version(path, name)[0]


def _shim_version(path):
    """cuDNN's shim answers cudnnGetVersion through the sub-library it opened, maybe another copy's: its own
    version is its file name's or its wheel's."""
    own = re.search(r"\.so\.(\d+\.\d+[\d.]*)$", os.path.realpath(path))
    return (own.group(1), "file name") if own else wheel_version(path)


def _lib_version(path, name):
    """(version, where it was read: "library" | "wheel <name>" | "file name" | "soname")."""
    shim = _shim_version(path) if re.match(r"libcudnn\.so\.\d+$", name) else None
    if shim:
        return shim
    try:
        answer = _library_answer(ctypes.CDLL(path), name)
    except (OSError, AttributeError):
        answer = None
    if answer:
        return answer, "library"
    wheel = wheel_version(path)
    if wheel:
        return wheel
    m = re.search(r"\.so\.([\d.]+)$", path)
    return (m.group(1), "soname") if m else (None, None)


def _library_answer(lib, name):
    """The library's own version call: cudnnGetVersion, cudaRuntimeGetVersion / cuDriverGetVersion,
    ncclGetVersion, cublasGetProperty; None when it has none that answers."""
    if name.startswith("libcudnn") and hasattr(lib, "cudnnGetVersion"):
        lib.cudnnGetVersion.restype = ctypes.c_size_t
        v = lib.cudnnGetVersion()
        return f"{v // 10000}.{v % 10000 // 100}.{v % 100}" if v >= 90000 else f"{v // 1000}.{v % 1000 // 100}.{v % 100}"
    out = ctypes.c_int(0)
    for fn in ("cudaRuntimeGetVersion", "cuDriverGetVersion"):
        if hasattr(lib, fn) and getattr(lib, fn)(ctypes.byref(out)) == 0:
            return f"{out.value // 1000}.{out.value % 1000 // 10}"
    if name.startswith("libnccl") and hasattr(lib, "ncclGetVersion"):
        # NCCL_VERSION_CODE: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z from 2.9 (nccl.h)
        if lib.ncclGetVersion(ctypes.byref(out)) == 0 and out.value:
            v = out.value
            return f"{v // 10000}.{v % 10000 // 100}.{v % 100}" if v >= 20900 else f"{v // 1000}.{v % 1000 // 100}.{v % 100}"
    if hasattr(lib, "cublasGetProperty"):
        parts = []
        for prop in range(3):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            if lib.cublasGetProperty(prop, ctypes.byref(out)) != 0:
                break
            parts.append(str(out.value))
        return ".".join(parts) or None
    return None


def wheel_version(path):
    """For a library inside an nvidia-* wheel (site-packages/nvidia/<part>/lib/...), (the wheel's version,
    "wheel nvidia-nccl-cu12"), read from the .dist-info whose RECORD lists the file; else None."""
    m = re.search(r"^(.*)/nvidia/([^/]+)/lib/[^/]+$", path)
    if not m:
        return None
    site = m.group(1)
    rel = "nvidia/" + path[len(site) + len("/nvidia/"):]
    try:
        entries = os.listdir(site)
    except OSError:
        return None
    for entry in entries:
        if not (entry.startswith("nvidia_") and entry.endswith(".dist-info")):
            continue
        try:
            with open(os.path.join(site, entry, "RECORD")) as fh:
                if not any(line.startswith(rel + ",") for line in fh):
                    continue
        except OSError:
            continue
        name, _, version = entry[:-len(".dist-info")].rpartition("-")
        return version, "wheel " + name.replace("_", "-")
    return None


def cpu_check(conv_cpu):
    """The CPU path against the naive reference; returns the max abs error, raises if it is wrong."""
    rng = random.Random(1234)
    x, w = nested([N, C, H, W], rng), nested([K, C, R, R], rng)
    got = conv_cpu(x, w)
    ref = reference_conv(x, w)
    err = max_err(got, ref)
    if err > ATOL + RTOL * max_abs(ref):
        raise ArithmeticError(f"CPU convolution differs from the reference by {err:.3g}")
    return err


# --- torch ---------------------------------------------------------------------------------------

def run_torch(gpu_expected):
    import torch

    info = {"version": torch.__version__, "cuda": torch.version.cuda}  # type: dict
    emit(stage="imported", **info)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    F = torch.nn.functional

    def conv_cpu(x, w):
        return F.conv2d(torch.tensor(x, dtype=torch.float32), torch.tensor(w, dtype=torch.float32)).tolist()

    info["cpu_error"] = cpu_check(conv_cpu)
    emit(stage="cpu_checked", **info)
    available = getattr(getattr(getattr(torch, "backends", None), "cudnn", None), "is_available", None)
    if torch.version.cuda is not None and callable(available) and available():
        # torch's own check of the cuDNN it gets against the one it was built with, as its first cuDNN use
        # makes it; no GPU needed (it raises "cuDNN version incompatibility" on a mismatch)
        info["cudnn"] = _cudnn_version(torch.backends.cudnn.version())
        emit(stage="cudnn_checked", **info)
    if torch.version.cuda is None:
        if gpu_expected:
            return dict(info, status="failed", finding_code="CPU_ONLY_BUILD",
                        cause=f"torch {torch.__version__} is a CPU-only build (torch.version.cuda is None) on a machine with a GPU")
        return dict(info, status="not_possible", cause="no GPU here and torch is a CPU-only build: only the CPU path was checked")
    if not torch.cuda.is_available():
        if not gpu_expected:
            return dict(info, status="not_possible", cause="no GPU or driver here: only the CPU path was checked")
        torch.cuda.init()  # raises with the runtime's own words (driver too old, no device ...)
        return dict(info, status="failed", cause="torch.cuda.is_available() is False")
    dev = torch.device("cuda:0")
    info["device_name"] = torch.cuda.get_device_name(0)
    info["compute_capability"] = "%d.%d" % torch.cuda.get_device_capability(0)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(GN, GC, GH, GW, generator=g) * 2 - 1
    w = torch.rand(GK, GC, 3, 3, generator=g) * 2 - 1
    a = torch.rand(256, 256, generator=g) * 2 - 1
    y_gpu = F.conv2d(x.to(dev), w.to(dev), padding=1)
    torch.cuda.synchronize()
    info["time_to_first_result_s"] = round(time.perf_counter() - T0, 4)
    m_gpu = (a.to(dev) @ a.to(dev)).cpu()
    y_cpu, m_cpu = F.conv2d(x, w, padding=1), a @ a
    info["max_abs_error"] = max(float((y_gpu.cpu() - y_cpu).abs().max()), float((m_gpu - m_cpu).abs().max()))
    info["cudnn"] = _cudnn_version(torch.backends.cudnn.version())
    info["cudnn_used"] = bool(torch.backends.cudnn.is_available() and torch.backends.cudnn.enabled)
    try:
        info["cudnn_compiled"] = ".".join(str(p) for p in torch._C._cudnn.getCompileVersion())
    except Exception:
        pass
    tol = 1e-3 * max(1.0, float(y_cpu.abs().max()))
    if info["max_abs_error"] > tol:
        return dict(info, status="failed", finding_code="WRONG_RESULT",
                    cause=f"GPU and CPU results differ by {info['max_abs_error']:.3g} (tolerance {tol:.3g})")
    return dict(info, status="verified")


def _cudnn_version(v):
    if not v:
        return None
    return f"{v // 10000}.{v % 10000 // 100}.{v % 100}" if v >= 90000 else f"{v // 1000}.{v % 1000 // 100}.{v % 100}"


# --- tensorflow ----------------------------------------------------------------------------------

def run_tensorflow(gpu_expected):
    import tensorflow as tf

    build = tf.sysconfig.get_build_info() if hasattr(tf.sysconfig, "get_build_info") else {}
    info = {"version": tf.__version__, "cuda": build.get("cuda_version"), "cudnn": build.get("cudnn_version")}
    emit(stage="imported", **info)
    tf.config.experimental.enable_tensor_float_32_execution(False)

    def conv_cpu(x, w):  # the reference is NCHW / KCRS; TensorFlow wants NHWC / RSCK
        with tf.device("/CPU:0"):
            xt = tf.transpose(tf.constant(x, tf.float32), [0, 2, 3, 1])
            wt = tf.transpose(tf.constant(w, tf.float32), [2, 3, 1, 0])
            return tf.transpose(tf.nn.conv2d(xt, wt, 1, "VALID"), [0, 3, 1, 2]).numpy().tolist()

    info["cpu_error"] = cpu_check(conv_cpu)
    emit(stage="cpu_checked", **info)
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        if not build.get("is_cuda_build", True) and gpu_expected:
            return dict(info, status="failed", finding_code="CPU_ONLY_BUILD", cause="tensorflow is a CPU-only build")
        if gpu_expected:
            return dict(info, status="failed", cause="tensorflow sees no GPU although the machine has one")
        return dict(info, status="not_possible", cause="no GPU or driver here: only the CPU path was checked")
    x = tf.random.stateless_uniform([GN, GH, GW, GC], seed=[1, 2], minval=-1, maxval=1)
    w = tf.random.stateless_uniform([3, 3, GC, GK], seed=[3, 4], minval=-1, maxval=1)
    with tf.device("/GPU:0"):
        y_gpu = tf.nn.conv2d(x, w, 1, "SAME").numpy()
    info["time_to_first_result_s"] = round(time.perf_counter() - T0, 4)
    with tf.device("/CPU:0"):
        y_cpu = tf.nn.conv2d(x, w, 1, "SAME").numpy()
    info["max_abs_error"] = float(abs(y_gpu - y_cpu).max())
    info["device_name"] = gpus[0].name
    if info["max_abs_error"] > 1e-3 * max(1.0, float(abs(y_cpu).max())):
        return dict(info, status="failed", finding_code="WRONG_RESULT", cause="GPU and CPU results differ")
    return dict(info, status="verified")


# --- jax -----------------------------------------------------------------------------------------

def run_jax(gpu_expected):
    import jax
    import jax.numpy as jnp

    info = {"version": jax.__version__}
    emit(stage="imported", **info)
    jax.config.update("jax_default_matmul_precision", "highest")
    cpu = jax.devices("cpu")[0]

    def conv_cpu(x, w):
        xs = jax.device_put(jnp.asarray(x, jnp.float32), cpu)
        ws = jax.device_put(jnp.asarray(w, jnp.float32), cpu)
        return jax.lax.conv(xs, ws, (1, 1), "VALID").tolist()

    info["cpu_error"] = cpu_check(conv_cpu)
    emit(stage="cpu_checked", **info)
    try:
        gpus = jax.devices("gpu")
    except RuntimeError as exc:
        if gpu_expected:
            return dict(info, status="failed", cause=f"jax sees no GPU: {exc}")
        return dict(info, status="not_possible", cause="no GPU or driver here: only the CPU path was checked")
    key = jax.random.PRNGKey(0)
    x = jax.random.uniform(key, (GN, GC, GH, GW), minval=-1, maxval=1)
    w = jax.random.uniform(jax.random.PRNGKey(1), (GK, GC, 3, 3), minval=-1, maxval=1)
    y_gpu = jax.lax.conv(jax.device_put(x, gpus[0]), jax.device_put(w, gpus[0]), (1, 1), "SAME").block_until_ready()
    info["time_to_first_result_s"] = round(time.perf_counter() - T0, 4)
    y_cpu = jax.lax.conv(jax.device_put(x, cpu), jax.device_put(w, cpu), (1, 1), "SAME")
    info["max_abs_error"] = float(jnp.abs(jax.device_put(y_gpu, cpu) - y_cpu).max())
    info["device_name"] = str(gpus[0].device_kind)
    if info["max_abs_error"] > 1e-3 * max(1.0, float(jnp.abs(y_cpu).max())):
        return dict(info, status="failed", finding_code="WRONG_RESULT", cause="GPU and CPU results differ")
    return dict(info, status="verified")


# --- the extensions built against torch -----------------------------------------------------------------------
#
# (distributions, the module whose import loads the compiled code, the smallest GPU operation or None): an
# extension is checked when one of its distributions is installed, after torch's own work, in this process.

def _xformers_loaded(module):
    """xFormers logs its failed C++ library instead of raising: the exception it kept is the import's."""
    lib = sys.modules.get("xformers._cpp_lib")
    failed = getattr(lib, "_cpp_library_load_exception", None)
    if failed is not None:  # its words, and the loader's below them ("...: undefined symbol: _ZN3c10...")
        words, cause = [str(failed)], failed.__cause__
        while cause is not None and len(words) < 4:
            words.append(f"  caused by {type(cause).__name__}: {cause}")
            cause = cause.__cause__ or cause.__context__
        raise ImportError("\n".join(words)) from failed


def _attention_reference(torch, q, k, v):
    """softmax(Q K^T / sqrt(d)) V in fp32 on the CPU, heads as the second dimension ([B, H, S, D])."""
    q, k, v = (t.float().cpu() for t in (q, k, v))
    return torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1) @ v


def _xformers_op(torch):
    import xformers.ops as xops

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.rand(2, 64, 4, 32, generator=g) - 0.5 for _ in range(3))  # [B, S, H, D]
    dev = torch.device("cuda:0")
    out = xops.memory_efficient_attention(*(t.to(dev, torch.float16) for t in (q, k, v))).float().cpu()
    ref = _attention_reference(torch, *(t.transpose(1, 2) for t in (q, k, v))).transpose(1, 2)
    return float((out - ref).abs().max()), 2e-2


def _flash_attn_op(torch):
    from flash_attn import flash_attn_func

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.rand(2, 64, 4, 32, generator=g) - 0.5 for _ in range(3))  # [B, S, H, D]
    dev = torch.device("cuda:0")
    out = flash_attn_func(*(t.to(dev, torch.float16) for t in (q, k, v))).float().cpu()
    ref = _attention_reference(torch, *(t.transpose(1, 2) for t in (q, k, v))).transpose(1, 2)
    return float((out - ref).abs().max()), 2e-2


def _onnx_add_model():
    """The smallest ONNX model, Z = X + Y over 4 floats, as protobuf bytes (onnx.proto's field numbers; the onnx
    package is not needed)."""
    def varint(n):
        out = b""
        while True:
            b, n = n & 0x7F, n >> 7
            out += bytes([b | (0x80 if n else 0)])
            if not n:
                return out

    def field(num, payload):  # a length-delimited field
        return varint(num << 3 | 2) + varint(len(payload)) + payload

    def number(num, value):
        return varint(num << 3) + varint(value)

    def value_info(name):  # ValueInfoProto{name, type: TypeProto{tensor_type{elem_type FLOAT, shape [4]}}}
        shape = field(2, field(1, number(1, 4)))
        return field(1, name.encode()) + field(2, field(1, number(1, 1) + shape))

    node = field(1, b"X") + field(1, b"Y") + field(2, b"Z") + field(4, b"Add")
    graph = field(1, node) + field(2, b"g") + field(11, value_info("X")) + field(11, value_info("Y")) + \
        field(12, value_info("Z"))
    return number(1, 7) + field(7, graph) + field(8, number(2, 13))


def _onnxruntime_op(torch):
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(_onnx_add_model(), providers=["CUDAExecutionProvider"])
    if session.get_providers()[:1] != ["CUDAExecutionProvider"]:  # ORT falls back to the CPU in silence
        raise RuntimeError("the CUDA execution provider did not load (the session runs on " +
                           ", ".join(session.get_providers()) + "); ONNX Runtime's log above says why")
    x = np.arange(4, dtype=np.float32)
    y = np.full(4, 0.5, dtype=np.float32)
    (z,) = session.run(None, {"X": x, "Y": y})
    return float(abs(z - (x + y)).max()), 1e-6


def _cupy_op(torch):
    import cupy
    import numpy as np

    a = np.linspace(-1.0, 1.0, 4096, dtype=np.float32)
    got = cupy.asnumpy(cupy.sin(cupy.asarray(a)) * 2.0)
    return float(abs(got - np.sin(a) * 2.0).max()), 1e-5


def _scatter_op(torch):
    import torch_scatter

    src = torch.arange(8, dtype=torch.float32)
    index = torch.tensor([0, 1, 0, 1, 2, 2, 3, 3])
    got = torch_scatter.scatter_add(src.cuda(), index.cuda(), dim=0).cpu()
    return float((got - torch.zeros(4).index_add_(0, index, src)).abs().max()), 1e-6


EXTENSIONS = (
    (("xformers",), "xformers", _xformers_op),
    (("flash-attn", "flash_attn"), "flash_attn", _flash_attn_op),
    (("vllm",), "vllm._C", None),
    (("sgl-kernel", "sgl_kernel"), "sgl_kernel", None),
    (("onnxruntime-gpu", "onnxruntime_gpu"), "onnxruntime", _onnxruntime_op),
    (("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy"), "cupy", _cupy_op),
    (("torch-scatter", "torch_scatter"), "torch_scatter", _scatter_op),
    (("torch-sparse", "torch_sparse"), "torch_sparse", None),
    (("torch-cluster", "torch_cluster"), "torch_cluster", None),
    (("pyg-lib", "pyg_lib"), "pyg_lib", None),
    (("bitsandbytes",), "bitsandbytes", None),
)
_AFTER_IMPORT = {"xformers": _xformers_loaded}


def _installed(names):
    """(distribution, version) of the first of ``names`` installed, else None."""
    from importlib import metadata

    for name in names:
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def run_extensions(gpu):
    """Import every installed extension after torch's work; on a GPU, its smallest operation against the CPU.
    One entry per extension: {package, version, module, status (imported / failed / verified / wrong), error,
    max_abs_error}."""
    import torch

    out = []
    for names, module, op in EXTENSIONS:
        found = _installed(names)
        if found is None:
            continue
        entry = {"package": found[0], "version": found[1], "module": module}
        emit(stage="extension " + found[0])  # a crash from here on is this extension's
        try:
            __import__(module)
            loaded = _AFTER_IMPORT.get(module)
            if loaded is not None:
                loaded(module)
            entry["status"] = "imported"
            if gpu and op is not None:
                err, tol = op(torch)
                entry["max_abs_error"] = err
                entry["status"] = "verified" if err <= tol else "wrong"
        except BaseException as exc:  # the extension's own words
            entry["status"] = "failed"
            entry["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        out.append(entry)
    return out


RUNNERS = {"torch": run_torch, "tensorflow": run_tensorflow, "jax": run_jax}
MODULES = {"torch": "torch", "tensorflow": "tensorflow", "jax": "jax"}


def main(argv):
    framework, gpu_expected = argv[0], argv[1:2] == ["1"]
    emit(stage="started", framework=framework)
    try:
        result = RUNNERS[framework](gpu_expected)
    except ModuleNotFoundError as exc:
        if exc.name == MODULES[framework]:
            result = {"status": "not_installed", "cause": f"{framework} is not installed"}
        else:
            result = {"status": "failed", "cause": f"{type(exc).__name__}: {exc}"}
    except BaseException as exc:  # the framework's own words go back to the parent
        result = {"status": "failed", "cause": f"{type(exc).__name__}: {exc}"}
    if framework == "torch" and "torch" in sys.modules:
        gpu = result.get("status") == "verified"
        try:
            result["extensions"] = run_extensions(gpu)
        except BaseException as exc:  # torch itself cannot be imported again: nothing more to check
            result["extensions"] = [{"package": "?", "status": "failed", "error": f"{type(exc).__name__}: {exc}"}]
    result["maps"] = mapped_files()  # before mapped_libraries(), whose version calls may map more
    result["mapped_libraries"] = mapped_libraries()
    emit(stage="result", **result)


if __name__ == "__main__":
    main(sys.argv[1:])
