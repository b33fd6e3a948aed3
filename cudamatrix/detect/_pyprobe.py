"""Python-environment probe: standard library only, valid on Python >= 3.6.

Imported by :mod:`cudamatrix.detect.python_env` for the running interpreter, and run as a script in
another one (``--python PATH``), where it prints two JSON lines: :func:`early` (the possible extensions, from
folder names) at once, then the answer. It never imports a framework: versions
and requirements come from the distributions' metadata, file lists from their RECORD files.
"""
import json
import os
import re
import sys

# distributions whose metadata matters for CUDA consistency (canonical names), and name prefixes
RELEVANT = {"torch", "torchvision", "torchaudio", "tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly",
            "tensorflow-intel", "jax", "jaxlib", "triton", "pytorch-triton", "xformers", "flash-attn",
            "onnxruntime-gpu", "cupy", "google-colab", "ipykernel", "paddlepaddle-gpu",
            "cuda-toolkit", "cuda-bindings", "cuda-pathfinder", "numpy",
            # PyG's compiled wheels: their local tag (+pt28cu128) names the torch build (diagnose/findlinks.py)
            "torch-scatter", "torch-sparse", "torch-cluster", "torch-spline-conv", "pyg-lib"}
PREFIXES = ("nvidia-", "jax-cuda", "jax-rocm", "cupy-cuda")
WITH_FILES = ("nvidia-", "jax-cuda", "cupy-cuda")  # RECORD is read for these (frameworks' RECORDs are huge)
# not extensions (the frameworks themselves, CUDA's own wheels): left out of the list of the others
NOT_EXTENSIONS = {"torch", "tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "tensorflow-intel", "jax",
                  "jaxlib", "triton", "pytorch-triton", "paddlepaddle-gpu"}


def pep503_name(name):
    # PEP 503, as cudamatrix.names.canonical: this file runs alone in other interpreters (stdlib only)
    return re.sub(r"[-_.]+", "-", name).lower()


def relevant(name):
    return name in RELEVANT or name.startswith(PREFIXES)


def _headers(text):
    """Name, Version and Requires-Dist from a METADATA / PKG-INFO text (stops at the body)."""
    out = {"Requires-Dist": []}  # type: dict
    for line in text.replace("\r\n", "\n").split("\n\n", 1)[0].split("\n"):
        key, sep, value = line.partition(":")
        if not sep or line[:1] in " \t":
            continue
        if key == "Requires-Dist":
            out["Requires-Dist"].append(value.strip())
        elif key in ("Name", "Version"):
            out[key] = value.strip()
    return out


def _read(path, limit=-1):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(limit)
    except OSError:
        return None


def _requires_of(meta_dir):
    """(Version, Requires-Dist) from the METADATA headers, the same file importlib.metadata reads.

    Read directly rather than through ``importlib.metadata.Distribution.metadata``: that runs the e-mail
    parser over the whole file, README body included (2-3 ms for torch alone), and does not exist before 3.8.
    """
    text = _read(os.path.join(meta_dir, "METADATA"), 262144) or _read(os.path.join(meta_dir, "PKG-INFO"), 262144) or ""
    h = _headers(text)
    return h.get("Version"), h["Requires-Dist"]


def _record(meta_dir):
    text = _read(os.path.join(meta_dir, "RECORD"))
    if text is None:
        return None
    files = []
    for line in text.splitlines():
        if line.startswith('"'):
            import csv
            row = next(csv.reader([line]), None)
            path = row[0] if row else ""
        else:
            path = line.split(",", 1)[0]
        if path:
            files.append(path)
    return files


def _tags():
    import sysconfig
    impl = {"cpython": "cp", "pypy": "pp"}.get(sys.implementation.name, sys.implementation.name[:2])
    interp = "%s%d%d" % (impl, sys.version_info[0], sys.version_info[1])
    abi = interp + ("t" if "t" in getattr(sys, "abiflags", "") else "")
    plat = (sysconfig.get_platform() or "").replace("-", "_").replace(".", "_")
    if plat.startswith("linux_"):
        arch = plat[len("linux_"):]
        glibc = ""
        try:
            glibc = os.confstr("CS_GNU_LIBC_VERSION") or ""
        except (AttributeError, ValueError, OSError):
            pass
        m = re.match(r"glibc (\d+)\.(\d+)", glibc)
        platforms = (["manylinux_%s_%s_%s" % (m.group(1), m.group(2), arch)] if m else []) + [plat]
    else:
        platforms = [plat]
    tags = []
    for p in platforms:
        tags += ["%s-%s-%s" % (interp, abi, p), "%s-abi3-%s" % (interp, p)]
    tags += ["py3-none-%s" % platforms[0], "py3-none-any"]
    return plat, tags


def _installer():
    if os.path.isdir(os.path.join(sys.prefix, "conda-meta")):
        return "conda"
    cfg = _read(os.path.join(sys.prefix, "pyvenv.cfg")) or ""
    if re.search(r"^uv\s*=", cfg, re.M):
        return "uv"
    return "pip"


def collect(paths=None):
    """Everything the parent needs, as plain JSON-ready values."""
    plat, tags = _tags()
    paths, site = _folders(paths)
    dists, stack = [], []
    for base in _once(paths):
        relevant_dists, others = _folder_dists(base)
        dists += relevant_dists
        stack += others
    torch_version_py = _torch_version_py(site)
    return {
        "executable": sys.executable,
        "version": "%d.%d.%d" % sys.version_info[:3],
        "implementation": sys.implementation.name,
        "platform": plat,
        "tags": tags,
        "site_packages": site,
        "in_virtualenv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
        "installer": _installer(),
        "dists": dists,
        "stack": stack,
        "torch_version_py": torch_version_py,
    }


def _folder_dists(base):
    """The relevant distributions whose metadata folders lie in ``base``, in name order, and every installed
    distribution that may be an extension (name, version and metadata folder, nothing read: the parent reads them,
    :mod:`cudamatrix.detect.extensions`); ([], []) when the folder cannot be listed."""
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return [], []
    dists, stack = [], []
    for entry in names:
        if not entry.endswith((".dist-info", ".egg-info")) or entry.startswith("~"):
            continue  # "~orch-2.5.1.dist-info": pip's stash of a half-done uninstall, not a distribution
        item = _dist(base, entry)
        if item is not None:
            dists.append(item)
        other = _other(base, entry)
        if other is not None:
            stack.append(other)
    return dists, stack


def early(paths=None):
    """What the parent's extension scan needs, from folder names alone (no metadata read): the site-packages
    folders and the distributions that may be extensions, as :func:`collect` lists them. The script prints it
    first, so the parent reads those distributions' files while the rest is collected (issue #39)."""
    paths, site = _folders(paths)
    stack = []
    for base in _once(paths):
        try:
            names = sorted(os.listdir(base))
        except OSError:
            continue
        for entry in names:
            other = None if entry.startswith("~") else _other(base, entry)
            if other is not None:
                stack.append(other)
    return {"site_packages": site, "stack": stack}


def _folders(paths):
    """The folders of ``paths`` (default ``sys.path``) that exist, and those of them that are site-packages."""
    paths = [p for p in (paths if paths is not None else sys.path) if p and os.path.isdir(p)]
    return paths, [p for p in paths if os.path.basename(p.rstrip("/\\")) in ("site-packages", "dist-packages")]


def _once(paths):
    """Each folder once, by its real path (a symlinked site-packages is listed once), in order."""
    seen = set()
    for base in paths:
        real = os.path.realpath(base)
        if real not in seen:
            seen.add(real)
            yield base


def _other(base, entry):
    """A wheel-installed distribution that may be an extension, as its folder's name says; None for a framework,
    CUDA's own wheels and an egg."""
    if not entry.endswith(".dist-info"):
        return None
    name, _, version = entry[:-len(".dist-info")].partition("-")
    cname = pep503_name(name)
    if cname in NOT_EXTENSIONS or cname.startswith(("nvidia-", "jax-cuda", "jax-rocm")):
        return None
    return {"name": cname, "version": version, "location": base, "meta": entry}


def _dist(base, entry):
    """The distribution of the metadata folder ``entry`` in ``base`` (name, version, location, nvidia
    requirements, and the files it installed for the distributions whose files matter); None when the
    name is not one detect reads."""
    stem = entry.rsplit(".", 1)[0]
    name, _, version = stem.partition("-")
    version = version.split("-py")[0] if entry.endswith(".egg-info") else version
    cname = pep503_name(name)
    if not relevant(cname):
        return None
    meta_dir = os.path.join(base, entry)
    meta_version, requires = _requires_of(meta_dir)
    item = {"name": cname, "version": meta_version or version, "location": base,
            "requires": [r for r in requires if pep503_name(r).startswith("nvidia-")]}
    if cname.startswith(WITH_FILES):
        item["files"] = _record(meta_dir)
    return item


def _torch_version_py(site):
    """The start of torch/version.py in the first site-packages folder that has one (the variant torch was
    built for), None when none has."""
    for base in site:
        text = _read(os.path.join(base, "torch", "version.py"))
        if text:
            return text[:4000]
    return None


if __name__ == "__main__":
    if sys.version_info < (3, 6):
        sys.stderr.write("cudamatrix needs Python >= 3.6 to inspect an environment; this is %s\n" % sys.version.split()[0])
        sys.exit(3)
    sys.stdout.write(json.dumps({"early": early()}) + "\n")  # a line of its own, sent at once
    sys.stdout.flush()
    sys.stdout.write(json.dumps(collect()))
    sys.stdout.write("\n")
