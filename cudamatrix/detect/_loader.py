"""The loader child: loads NVIDIA libraries in a short-lived process and prints one JSON line per answer.

Run as ``python -I -S _loader.py CONFIG_JSON`` by :mod:`cudamatrix.detect.driver`; standard library only
(plus ``pynvml`` from the directory named in the config). Why a child and not ``ctypes`` in the caller:
loading a CUDA library runs its constructors, which can hang on a sick driver or crash on a broken copy,
and a copy loaded into the caller would later be reused by soname when a framework is imported into the
same process (a notebook calling ``cudamatrix.fix()``), hiding the copy the framework would really load.
Before each risky step the child prints ``{"start": KEY}``, so a hang or a crash names its culprit.

Each library copy is opened with ``dlmopen(LM_ID_NEWLM)``, in a link namespace of its own: opened side by side
in one namespace, the second cuDNN 9 copy would get the first one's sub-libraries (libcudnn_graph.so.9 ...),
which the loader reuses by soname, and answer with the first copy's version. Where dlmopen is missing or
refuses (no free namespace, static TLS exhausted) the copy is opened with plain dlopen and RTLD_LOCAL.
"""
import ctypes
import json
import os
import sys
import time

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


def probe_nvml(pynvml_dir):
    try:
        ctypes.CDLL("libnvidia-ml.so.1", mode=RTLD_LOCAL)
    except OSError as exc:
        return {"probe": "nvml", "error": "NVML Shared Library Not Found", "code": 12, "detail": str(exc)}
    if pynvml_dir:
        sys.path.insert(0, pynvml_dir)
    try:
        import pynvml
    except ImportError as exc:
        return {"probe": "nvml", "error": "pynvml not importable: %s" % exc, "code": None}
    out = {"probe": "nvml", "path": mapped_path("libnvidia-ml.so")}  # type: dict
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        out.update(error=str(exc), code=exc.value)
        return out

    def opt(fn, *args, **kwargs):
        try:
            value = fn(*args, **kwargs)
        except Exception:  # NVMLError (not supported, function not found), or a ctypes error
            return None
        return value.decode(errors="replace") if isinstance(value, bytes) else value

    out["driver"] = opt(pynvml.nvmlSystemGetDriverVersion)
    cuda = opt(getattr(pynvml, "nvmlSystemGetCudaDriverVersion_v2", pynvml.nvmlSystemGetCudaDriverVersion))
    out["cuda"] = cuda if cuda is not None else opt(pynvml.nvmlSystemGetCudaDriverVersion)
    gpus = []
    try:
        count = pynvml.nvmlDeviceGetCount()
    except pynvml.NVMLError as exc:
        out.update(error=str(exc), code=exc.value)
        count = 0
    for i in range(count):
        gpu = {"index": i}  # type: dict
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
        except pynvml.NVMLError as exc:
            gpu.update(error=str(exc), code=exc.value)
            gpus.append(gpu)
            continue
        gpu["name"] = opt(pynvml.nvmlDeviceGetName, handle)
        cc = opt(pynvml.nvmlDeviceGetCudaComputeCapability, handle)
        gpu["cc"] = "%d.%d" % tuple(cc) if cc else None
        # the v2 structure keeps the driver's reserved memory apart from "used", as nvidia-smi shows it
        # (on an idle H200 with driver 580, v1 reported 615 MiB used where nvidia-smi said 0 and 616 reserved)
        v2 = getattr(pynvml, "nvmlMemory_v2", None)
        mem = opt(pynvml.nvmlDeviceGetMemoryInfo, handle, version=v2) if v2 is not None else None
        if mem is None:
            mem = opt(pynvml.nvmlDeviceGetMemoryInfo, handle)
        if mem is not None:
            gpu["total"] = int(mem.total) // (1024 * 1024)
            gpu["used"] = int(mem.used) // (1024 * 1024)
        gpu["uuid"] = opt(pynvml.nvmlDeviceGetUUID, handle)
        pci = opt(pynvml.nvmlDeviceGetPciInfo, handle)
        if pci is not None:
            bus = getattr(pci, "busId", b"")
            gpu["pci"] = bus.decode(errors="replace") if isinstance(bus, bytes) else str(bus)
        mig = opt(pynvml.nvmlDeviceGetMigMode, handle)
        gpu["mig"] = ("Enabled" if mig[0] else "Disabled") if mig else None
        procs = opt(pynvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
        gpu["procs"] = []
        for p in procs:
            used = getattr(p, "usedGpuMemory", None)
            gpu["procs"].append({"pid": getattr(p, "pid", None),
                                 "name": opt(pynvml.nvmlSystemGetProcessName, getattr(p, "pid", 0)),
                                 "used": int(used) // (1024 * 1024) if used else None})
        gpus.append(gpu)
    out["gpus"] = gpus
    opt(pynvml.nvmlShutdown)
    return out


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


def main(argv):
    config = json.loads(argv[1])
    skip = set(config.get("skip", []))
    if config.get("nvml") and "nvml" not in skip:
        emit({"start": "nvml"})
        emit(probe_nvml(config.get("pynvml_dir")))
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
    sys.exit(main(sys.argv))
