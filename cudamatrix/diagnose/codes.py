"""Every finding code the tool gives, with its severity and what it means: the one list the reference
(``docs/reference.md``, made by ``scripts/gen_reference.py``) is generated from.

``DOCTOR``: the codes of doctor's findings (``diagnose``, and the findings a pasted report's words imply);
``tests/diagnose/test_findings.py`` holds a case raising each one. ``VERIFY``: the ``finding_code`` of a
framework's verification (``verify``); a test reads every code the verify modules write and finds it here.
"""
from __future__ import annotations

from cudamatrix.schema import record


@record(frozen=True)
class Code:
    """One finding code: its severity (``error``, ``warning``, ``info``, or ``error or warning`` where the
    facts decide) and one sentence of what it means."""

    code: str
    severity: str
    meaning: str


DOCTOR: tuple[Code, ...] = (
    Code("NO_DRIVER", "error or warning", "No NVIDIA driver answers: no /proc/driver/nvidia/version, no "
         "libnvidia-ml, no nvidia-smi (an error when a CUDA build is installed, else a warning); in a pasted report, "
         "an error quoting the paste, its fix chosen by where it ran (a container, WSL, a kernel without the "
         "module)."),
    Code("DRIVER_TOO_OLD", "error", "The driver runs a CUDA older than an installed framework build needs, even "
         "under minor-version compatibility."),
    Code("DRIVER_LIBRARY_MISMATCH", "error", "The kernel module and the user-space driver library are of "
         "different versions (NVML's 'Driver/library version mismatch')."),
    Code("NO_DEVICE_VISIBLE", "error", "A driver answers but no GPU is visible (CUDA_VISIBLE_DEVICES, a container "
         "without the device)."),
    Code("GPU_UNUSABLE", "error", "A GPU is listed but cannot be used (an error state the driver reports)."),
    Code("GPU_UNSUPPORTED_BY_DRIVER", "error", "The driver is older than the first driver that drives the GPU's "
         "architecture."),
    Code("STUB_LIBCUDA", "error", "The libcuda a loader finds is the toolkit's link-time stub, not the driver's."),
    Code("CPU_ONLY_BUILD", "error", "A CPU build of a framework is installed on a machine with a usable GPU (in a "
         "paste, also beside a CUDA toolkit it shows: +cpu next to nvcc)."),
    Code("ARCH_UNSUPPORTED", "error", "The installed build has no kernel image (SASS, or PTX of a lower "
         "architecture) for a GPU present."),
    Code("CUDNN_MISMATCH", "error", "The cuDNN the framework will run is another major, or an older minor, than "
         "the one it was built with (or none could be loaded)."),
    Code("LIBRARY_SHADOWED", "error or warning", "Another file wins over the framework's own copy of a CUDA "
         "library, through LD_LIBRARY_PATH or an earlier load (a warning in a pasted report, which carries no "
         "prediction)."),
    Code("LIBRARY_PRELOADED", "error", "An LD_PRELOAD entry replaces the framework's own copy of a CUDA library."),
    Code("NVIDIA_WHEEL_DRIFT", "error", "An installed nvidia-* wheel is not the version a framework build pins."),
    Code("FILE_CLOBBER", "error", "Two distributions installed the same files (one finding per pair, listing the "
         "files)."),
    Code("FRAMEWORK_CONFLICT", "error", "Co-installed frameworks need conflicting nvidia-* wheels (two CUDA majors "
         "of one library, or different exact pins)."),
    Code("TORCHVISION_MISMATCH", "error", "torchvision (or torchaudio) declares a torch other than the one "
         "installed."),
    Code("EXTENSION_ABI_MISMATCH", "error", "A torch extension (xformers, flash-attn, vllm, torch-scatter, ...) was "
         "built against another torch, C++ ABI or Python than the installed one: its compiled library does not load. "
         "In a paste: xFormers' 'built for ... you have ...', an undefined c10/at/torch symbol; installed: a shared "
         "object linking libc10 or libtorch needs torch symbols no library of the installed torch defines (its "
         ".dynsym against torch's GNU hash tables, never imported)."),
    Code("EXTENSION_PIN_MISMATCH", "error", "An installed distribution declares a torch, jax, jaxlib or tensorflow "
         "requirement the installed version breaks (its Requires-Dist, markers evaluated here, extras ignored; pip's "
         "'requires torch==X, but you have torch Y' in a paste); torchvision and torchaudio: TORCHVISION_MISMATCH "
         "when the matrix holds the torch; a PyG wheel (torch-scatter, pyg-lib, ...) whose local tag (+pt24cu121) "
         "names another torch major.minor than the installed torch, fixed by its find-links page's wheel for it."),
    Code("EXTENSION_CUDA_MISMATCH", "error", "An extension was built for another CUDA major (or another build of the "
         "same torch) than the framework's: onnxruntime-gpu for CUDA 11 beside a CUDA 12 torch in a paste; "
         "installed, a shared object linking libcudart/libcublas(Lt)/libnvrtc of another major, or another soname "
         "than the framework's own copy; a PyG wheel whose local tag names the installed torch's release and "
         "another variant (cu121 beside cu124, cpu beside a CUDA build)."),
    Code("EXTENSION_ARCH_UNSUPPORTED", "error", "An installed extension's shared objects carry no kernel image "
         "for a GPU present (read from their fatbinaries: no SASS of its major at or below its minor, no PTX at or "
         "below its architecture): its CUDA kernels fail with 'no kernel image is available'; or a GPU below the "
         "compute capability the package's own README or documentation states for its release."),
    Code("EXTENSION_VARIANT_CLASH", "error", "Two CUDA-major variants of one package are installed together "
         "(cupy-cuda12x and cupy-cuda13x): they write the same files."),
    Code("JAX_PLUGIN_MISMATCH", "error", "jaxlib and its CUDA plugin or PJRT wheel (jax-cudaNN-plugin, "
         "jax-cudaNN-pjrt) are installed at different versions; in a paste, JAX's own words (its plugin-version "
         "warning, a PJRT API version mismatch), quoted."),
    Code("PYTHON_UNSUPPORTED", "error", "The framework release has no wheels for this Python."),
    Code("GPU_MEMORY_BUSY", "warning", "80 % or more of a GPU's memory is in use."),
    Code("UNSAFE_LIBRARY_PATH", "warning", "An LD_LIBRARY_PATH folder is empty, relative or world-writable; detect "
         "does not load libraries from it."),
    Code("KNOWN_BAD", "error", "An advisory of advisories.json whose packages, GPU and driver match; one that needs a "
         "library to be seen states it (library and library_version, or library_missing) and is an error only when "
         "the facts show it, an info note when they do not show which copy is loaded."),
    Code("LOW_DISK", "warning", "Under 8 GiB free where packages, the temp folder or pip's cache live."),
    Code("LOW_HOST_MEMORY", "warning", "Under 2 GiB or 10 % of the host's memory available."),
    Code("UNKNOWN_FRAMEWORK_BUILD", "info", "The matrix lacks facts of the installed build (listed; for a release "
         "older than the matrix's first row, that no matrix data covers it); a release the "
         "matrix lacks is still judged on what the environment states: its build CUDA from +cuXXX or collect_env, "
         "the driver and GPUs of the report."),
    Code("TOOLKIT_NEWER_THAN_DRIVER", "info", "A CUDA toolkit newer than the driver runs is installed: harmless "
         "for wheels, which bring their own CUDA libraries."),
    Code("LIBRARY_MISSING", "error", "A CUDA library a program loads is not found ('libcudart.so.11.0: cannot open "
         "shared object file')."),
    Code("LIBRARY_MISMATCH", "error", "A CUDA library is older than the one a framework was built against (JAX's "
         "'Found cuSOLVER version 11002, but JAX was built against version 11401')."),
)

VERIFY: tuple[Code, ...] = (
    Code("WRONG_RESULT", "error", "The GPU ran the work and its result differs from the CPU's."),
    Code("VERIFY_TIMEOUT", "error", "The verification child did not finish within --timeout."),
    Code("VERIFY_CRASHED", "error", "The verification child died, and its last words match no known cause."),
    Code("NO_GPU", "error", "The framework sees no GPU (its own words: no CUDA GPUs are available)."),
    Code("GPU_OUT_OF_MEMORY", "error", "The work ran out of GPU memory (another process holds it, or the GPU is "
         "too small)."),
    Code("NOT_INSTALLED", "error", "No framework to verify is installed in the interpreter."),
    Code("PYTHON_NOT_FOUND", "error", "The interpreter to verify could not be started."),
    Code("EXTENSION_IMPORT_FAILED", "error", "An installed torch extension (xformers, flash-attn, vllm, onnxruntime, "
         "cupy, torch-scatter, ...) does not import beside the framework after its work, or importing it crashed "
         "the child; the cause quotes the extension's own words."),
    Code("LIBRARY_MIXED", "error", "One library family was mapped from copies of different versions (a cuDNN "
         "shim from the wheel, its sub-libraries from a system folder), even when the work ran."),
)


def by_code() -> dict[str, Code]:
    """Every code, doctor's and verify's, by its name."""
    return {c.code: c for c in DOCTOR + VERIFY}
