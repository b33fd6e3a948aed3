"""The loader child: loads NVIDIA libraries in a short-lived process and prints one JSON line per answer.

Run as ``python -I -S _loader.py CONFIG_JSON`` by :mod:`cudamatrix.detect.driver`; standard library only
(NVML through its C interface, by ``ctypes``). Why a child and not ``ctypes`` in the caller:
loading a CUDA library runs its constructors, which can hang on a sick driver or crash on a broken copy,
and a copy loaded into the caller would later be reused by soname when a framework is imported into the
same process (a notebook calling ``cudamatrix.fix()``), hiding the copy the framework would really load.
Before each risky step the child prints ``{"start": KEY}``, so a hang or a crash names its culprit.

Each library copy is opened with ``dlmopen(LM_ID_NEWLM)``, in a link namespace of its own: opened side by side
in one namespace, the second cuDNN 9 copy would get the first one's sub-libraries (libcudnn_graph.so.9 ...),
which the loader reuses by soname, and answer with the first copy's version. Where dlmopen is missing or
refuses (no free namespace, static TLS exhausted) the copy is opened with plain dlopen and RTLD_LOCAL.
"""
import time

BORN = time.monotonic()  # the script's first instant: the parent's spawn to here is the interpreter's start-up

import ctypes  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

RTLD_LOCAL = getattr(os, "RTLD_LOCAL", 0)
RTLD_NOW = getattr(os, "RTLD_NOW", 2)
CUDA_ERROR_STUB_LIBRARY = 34  # cuda.h: "the CUDA driver is a stub library"


LM_ID_NEWLM = -1
_T0 = [time.perf_counter()]


def emit(obj):
    now = time.perf_counter()
    if "probe" in obj:
        obj["ms"] = round((now - _T0[0]) * 1000.0, 2)
    _T0[0] = now
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


RTLD_DI_LMID = 1  # dlfcn.h: dlinfo() request for the namespace of a handle


def _dl():
    """dlmopen, dlsym, dlerror and dlinfo from the C library, or None where they cannot be had."""
    try:
        libc = ctypes.CDLL(None)
        fns = libc.dlmopen, libc.dlsym, libc.dlerror, libc.dlinfo
    except (OSError, AttributeError):
        try:
            libc = ctypes.CDLL("libdl.so.2")
            fns = libc.dlmopen, libc.dlsym, libc.dlerror, libc.dlinfo
        except (OSError, AttributeError):
            return None
    dlmopen, dlsym, dlerror, dlinfo = fns
    dlmopen.restype, dlmopen.argtypes = ctypes.c_void_p, [ctypes.c_long, ctypes.c_char_p, ctypes.c_int]
    dlsym.restype, dlsym.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]
    dlerror.restype, dlerror.argtypes = ctypes.c_char_p, []
    dlinfo.restype, dlinfo.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    return dlmopen, dlsym, dlerror, dlinfo


class Opened(object):
    """A library opened in its own namespace (or, failing that, with dlopen); symbols as ctypes functions.

    ``first``: files of the same copy opened before it in that namespace. cuDNN's shim answers
    cudnnGetVersion() through the sub-library it dlopens by name, which LD_LIBRARY_PATH can take from another
    copy; its own folder's sub-library, loaded first, answers to that name instead, so the answer is the
    copy's own version."""

    def __init__(self, path, dl, first=()):
        """``dl`` None: plain dlopen (libcuda crashes when opened in a second namespace)."""
        self.handle = self.lib = None
        self.namespace = False
        if dl is not None:
            dlmopen, self.dlsym, dlerror, dlinfo = dl
            lmid = LM_ID_NEWLM
            for sibling in first:
                handle = dlmopen(lmid, sibling.encode(), RTLD_NOW)
                ns = ctypes.c_long(0)
                if handle and lmid == LM_ID_NEWLM and dlinfo(handle, RTLD_DI_LMID, ctypes.byref(ns)) == 0:
                    lmid = ns.value
            self.handle = dlmopen(lmid, path.encode(), RTLD_NOW)
            if self.handle:
                self.namespace = True
                return
            dlerror()
        for sibling in first:
            try:
                ctypes.CDLL(sibling, mode=RTLD_LOCAL | RTLD_NOW)
            except OSError:
                pass
        self.lib = ctypes.CDLL(path, mode=RTLD_LOCAL | RTLD_NOW)  # raises OSError with the loader's words

    def function(self, name, restype, *argtypes):
        if self.lib is not None:
            fn = getattr(self.lib, name)  # AttributeError when missing
            fn.restype, fn.argtypes = restype, list(argtypes)
            return fn
        address = self.dlsym(self.handle, name.encode())
        if not address:
            raise AttributeError(name)
        return ctypes.CFUNCTYPE(restype, *argtypes)(address)


def mapped_path(prefix):
    """Path of the first mapped file whose name starts with ``prefix`` (what the loader picked)."""
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) == 6 and os.path.basename(parts[5].strip()).startswith(prefix):
                    return parts[5].strip()
    except OSError:
        pass
    return None


# NVML's C interface (nvml.h), called directly: the layouts below are the header's. Importing the pynvml module
# instead cost the child 34 ms of its 95 here (its own body and the ctypes.util -> subprocess/tempfile imports it
# pulls in), on detect's critical path. NVML_SUCCESS is 0 and NVML_ERROR_INSUFFICIENT_SIZE 7; the buffer sizes
# are NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE (80), NVML_DEVICE_NAME_V2_BUFFER_SIZE and
# NVML_DEVICE_UUID_V2_BUFFER_SIZE (96); nvmlSystemGetProcessName takes any length (1024 here).
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_VALUE_NOT_AVAILABLE = 2 ** 64 - 1  # usedGpuMemory where the driver cannot say (WDDM)


class NvmlMemoryV2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong), ("reserved", ctypes.c_ulonglong),
                ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


NVML_MEMORY_V2 = ctypes.sizeof(NvmlMemoryV2) | (2 << 24)  # nvml.h: NVML_STRUCT_VERSION(Memory, 2)


class NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class NvmlPciInfo(ctypes.Structure):
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint), ("bus", ctypes.c_uint),
                ("device", ctypes.c_uint), ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                ("busId", ctypes.c_char * 32)]


class NvmlProcessInfo(ctypes.Structure):  # nvmlProcessInfo_t, as filled by the _v3 call
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong), ("gpuInstanceId", ctypes.c_uint),
                ("computeInstanceId", ctypes.c_uint)]


class NvmlError(Exception):
    def __init__(self, code):
        Exception.__init__(self, code)
        self.code = code


class Nvml(object):
    """The loaded libnvidia-ml: each call returns nothing or raises NvmlError (its return code) or
    AttributeError (a driver too old for the entry point)."""

    def __init__(self, lib):
        self.lib = lib

    def __call__(self, name, *args):
        fn = getattr(self.lib, name)
        fn.restype = ctypes.c_int
        rc = fn(*args)
        if rc:
            raise NvmlError(rc)

    def first(self, names, *args):
        """Call the first of ``names`` the library exports (newest first)."""
        for name in names[:-1]:
            try:
                return self(name, *args)
            except AttributeError:
                continue
        return self(names[-1], *args)

    def text(self, name, size, *args):
        buf = ctypes.create_string_buffer(size)
        self(name, *(args + (buf, ctypes.c_uint(size))))
        return buf.value.decode(errors="replace")

    def message(self, code):
        """nvmlErrorString's words for ``code``."""
        try:
            fn = self.lib.nvmlErrorString
        except AttributeError:
            return "NVML Error with code %d" % code
        fn.restype, fn.argtypes = ctypes.c_char_p, [ctypes.c_int]
        words = fn(code)
        return words.decode(errors="replace") if words else "NVML Error with code %d" % code


def _opt(fn, *args):
    """``fn(*args)``, or None when the driver cannot answer (an NVML error, an entry point it lacks)."""
    try:
        return fn(*args)
    except (NvmlError, AttributeError, ctypes.ArgumentError):
        return None


def probe_nvml():
    began = time.monotonic()
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1", mode=RTLD_LOCAL)
    except OSError as exc:
        return {"probe": "nvml", "error": "NVML Shared Library Not Found", "code": 12, "detail": str(exc)}
    nvml = Nvml(lib)
    out = {"probe": "nvml", "path": mapped_path("libnvidia-ml.so")}  # type: dict
    loaded = time.monotonic()
    phases = {"load": round((loaded - began) * 1000.0, 2)}  # type: dict
    out["phases_ms"] = phases
    try:
        if hasattr(lib, "nvmlInitWithFlags"):
            nvml("nvmlInitWithFlags", ctypes.c_uint(0))
        else:
            nvml.first(("nvmlInit_v2", "nvmlInit"))
    except NvmlError as exc:
        out.update(error=nvml.message(exc.code), code=exc.code)
        return out
    except AttributeError:
        out.update(error="no nvmlInit symbol", code=None)
        return out
    initialised = time.monotonic()
    phases["init"] = round((initialised - loaded) * 1000.0, 2)
    out["driver"] = _opt(nvml.text, "nvmlSystemGetDriverVersion", 80)
    out["cuda"] = _opt(_int_out, nvml, ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"))
    gpus = []
    count = ctypes.c_uint(0)
    try:
        nvml.first(("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"), ctypes.byref(count))
    except NvmlError as exc:
        out.update(error=nvml.message(exc.code), code=exc.code)
        count.value = 0
    except AttributeError:
        count.value = 0
    for i in range(count.value):
        gpu = {"index": i}  # type: dict
        handle = ctypes.c_void_p()
        try:
            nvml.first(("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"), ctypes.c_uint(i),
                       ctypes.byref(handle))
        except NvmlError as exc:
            gpu.update(error=nvml.message(exc.code), code=exc.code)
            gpus.append(gpu)
            continue
        except AttributeError:
            gpus.append(gpu)
            continue
        gpu["name"] = _opt(nvml.text, "nvmlDeviceGetName", 96, handle)
        cc = _opt(_two_out, nvml, "nvmlDeviceGetCudaComputeCapability", handle, ctypes.c_int)
        gpu["cc"] = "%d.%d" % cc if cc else None
        # the v2 structure keeps the driver's reserved memory apart from "used", as nvidia-smi shows it
        # (on an idle H200 with driver 580, v1 reported 615 MiB used where nvidia-smi said 0 and 616 reserved)
        mem = _opt(_memory, nvml, handle, True)
        if mem is None:
            mem = _opt(_memory, nvml, handle, False)
        if mem is not None:
            gpu["total"] = int(mem.total) // (1024 * 1024)
            gpu["used"] = int(mem.used) // (1024 * 1024)
        gpu["uuid"] = _opt(nvml.text, "nvmlDeviceGetUUID", 96, handle)
        pci = _opt(_pci, nvml, handle)
        if pci is not None:
            gpu["pci"] = pci.busId.decode(errors="replace")
        mig = _opt(_two_out, nvml, "nvmlDeviceGetMigMode", handle, ctypes.c_uint)
        gpu["mig"] = ("Enabled" if mig[0] else "Disabled") if mig else None
        gpu["procs"] = []
        for p in _opt(_processes, nvml, handle) or []:
            used = p.usedGpuMemory
            gpu["procs"].append({"pid": p.pid, "name": _opt(nvml.text, "nvmlSystemGetProcessName", 1024,
                                                                 ctypes.c_uint(p.pid)),
                                 "used": int(used) // (1024 * 1024) if used and used != NVML_VALUE_NOT_AVAILABLE
                                 else None})
        gpus.append(gpu)
    out["gpus"] = gpus
    _opt(nvml, "nvmlShutdown")
    phases["query"] = round((time.monotonic() - initialised) * 1000.0, 2)
    return out


def _int_out(nvml, names):
    value = ctypes.c_int(0)
    nvml.first(names, ctypes.byref(value))
    return value.value


def _two_out(nvml, name, handle, kind):
    a, b = kind(0), kind(0)
    nvml(name, handle, ctypes.byref(a), ctypes.byref(b))
    return a.value, b.value


def _pci(nvml, handle):
    pci = NvmlPciInfo()
    nvml("nvmlDeviceGetPciInfo_v3", handle, ctypes.byref(pci))
    return pci


def _memory(nvml, handle, v2):
    if v2:
        mem = NvmlMemoryV2()
        mem.version = NVML_MEMORY_V2
        nvml("nvmlDeviceGetMemoryInfo_v2", handle, ctypes.byref(mem))
        return mem
    mem1 = NvmlMemory()
    nvml("nvmlDeviceGetMemoryInfo", handle, ctypes.byref(mem1))
    return mem1


def _processes(nvml, handle):
    """nvmlDeviceGetComputeRunningProcesses_v3: asked for the count first, then with room to spare (processes
    can start between the two calls)."""
    count = ctypes.c_uint(0)
    try:
        nvml("nvmlDeviceGetComputeRunningProcesses_v3", handle, ctypes.byref(count), None)
        return []  # NVML_SUCCESS with no room given: no processes
    except NvmlError as exc:
        if exc.code != NVML_ERROR_INSUFFICIENT_SIZE:
            raise
    count.value = count.value * 2 + 5
    infos = (NvmlProcessInfo * count.value)()
    nvml("nvmlDeviceGetComputeRunningProcesses_v3", handle, ctypes.byref(count), infos)
    return list(infos[:count.value])


def probe_libcuda():
    try:
        lib = ctypes.CDLL("libcuda.so.1", mode=RTLD_LOCAL | RTLD_NOW)
    except OSError as exc:
        return {"probe": "libcuda", "error": str(exc)}
    out = {"probe": "libcuda", "path": mapped_path("libcuda.so")}
    version = ctypes.c_int(0)
    try:
        rc = lib.cuDriverGetVersion(ctypes.byref(version))
    except AttributeError:
        out["error"] = "no cuDriverGetVersion symbol"
        return out
    out.update(rc=rc, version=version.value, stub=rc == CUDA_ERROR_STUB_LIBRARY)
    return out


# symbol, how it answers: "out" (int* argument), "ret" (returns size_t)
CALLS = {
    "cudart": ("cudaRuntimeGetVersion", "out"),
    "cudnn": ("cudnnGetVersion", "ret"),
    "cuda": ("cuDriverGetVersion", "out"),
}


def probe_library(path, name, dl, first=()):
    out = {"probe": "lib", "path": path}
    try:
        lib = Opened(path, None if name == "cuda" else dl, first)
    except OSError as exc:
        out["error"] = str(exc)
        return out
    out["namespace"] = lib.namespace
    symbol, style = CALLS[name]
    try:
        if style == "out":
            fn = lib.function(symbol, ctypes.c_int, ctypes.POINTER(ctypes.c_int))
            value = ctypes.c_int(0)
            out.update(rc=fn(ctypes.byref(value)), version=value.value)
        else:
            fn = lib.function(symbol, ctypes.c_size_t)
            out.update(rc=0, version=int(fn()))
    except AttributeError:
        out["error"] = "no %s symbol" % symbol
        return out
    if name == "cudnn":
        try:
            out["cudart"] = int(lib.function("cudnnGetCudartVersion", ctypes.c_size_t)())
        except AttributeError:
            pass
    return out


def main(argv, ready=None):
    """``ready``: when a forked child (:mod:`cudamatrix.detect.early`) had its imports done, before it waited
    for its question."""
    config = json.loads(argv[1])
    # CLOCK_MONOTONIC, one clock for every process of the machine
    emit({"clock": [BORN, ready if ready is not None else time.monotonic()]})
    skip = set(config.get("skip", []))
    if config.get("nvml") and "nvml" not in skip:
        emit({"start": "nvml"})
        emit(probe_nvml())
    if config.get("libcuda") and "libcuda" not in skip:
        emit({"start": "libcuda"})
        emit(probe_libcuda())
    dl = _dl() if config.get("libs") else None
    for item in config.get("libs", []):
        if item["path"] in skip:
            continue
        emit({"start": item["path"]})
        emit(probe_library(item["path"], item["name"], dl, item.get("first", ())))
    emit({"done": True})
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["-"]:  # started before the question was known: it comes on stdin (empty: nothing asked)
        _ready = time.monotonic()
        _question = sys.stdin.read()
        sys.exit(main([sys.argv[0], _question], _ready) if _question else 0)
    sys.exit(main(sys.argv))
