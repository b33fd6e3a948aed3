"""The proof table of issue #39: real (extension, torch) pairs, what their files say, and what doctor finds.

    python scripts/extension_pairs.py [--only SUBSTRING] [--json]

Each pair lays the members of a real extension wheel (its METADATA, WHEEL, RECORD and the shared objects and build
record named below, read from the package index by HTTP range requests and kept in $CUDAMATRIX_WHEEL_CACHE, the
cache tests/support/realwheels.py uses) into a throwaway site-packages beside a real torch install, linked, never copied:
$CUDAMATRIX_TORCH_CUDA_PYTHON (torch 2.14.1, CUDA 13.0), $CUDAMATRIX_TORCH211_PYTHON (torch 2.11.0, CUDA 13.0) and
$CUDAMATRIX_TORCH_CPU_PYTHON (a CPU torch), a pair whose torch is not set being skipped. A pair may state a GPU
(name, compute capability) and a driver, as ``--gpu`` would.

The expected finding is made from the files with other tools than doctor's: ``nm -D --undefined-only`` of each
object against ``nm -D --defined-only`` of every library of ``torch/lib`` (EXTENSION_ABI_MISMATCH when a torch symbol
is defined by none), the Requires-Dist naming torch against the installed version with ``packaging``
(EXTENSION_PIN_MISMATCH; TORCHVISION_MISMATCH is the same finding for torch's companions), ``readelf -d``'s NEEDED
CUDA libraries against torch's ``torch/version.py`` CUDA (EXTENSION_CUDA_MISMATCH), the distributions' names
(EXTENSION_VARIANT_CLASH for two ``-cudaNNx`` of one package) and the fatbinary headers as
``scripts/read_wheel_archs.py`` reads them (EXTENSION_ARCH_UNSUPPORTED). Doctor's finding is detect's scan
(:mod:`cudamatrix.detect.extensions`) and diagnose on the shipped matrix, in this process. Prints a markdown table
(or JSON lines); exit 1 when any pair's expected and found codes differ, 2 when no pair could run.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "scripts")]

from read_wheel_archs import fatbin_archs  # noqa: E402

from cudamatrix.detect import _pyprobe, extensions, python_env  # noqa: E402
from cudamatrix.diagnose import diagnose  # noqa: E402
from cudamatrix.ldso import elfcache  # noqa: E402
from cudamatrix.matrix import discover  # noqa: E402
from cudamatrix.matrix.index import (  # noqa: E402
    EOCD_MAX,
    IndexClient,
    IndexFile,
    IndexReadError,
    _central_directory,
    pip_default_index,
)
from cudamatrix.matrix.load import load_matrix  # noqa: E402
from cudamatrix.models import Driver, Environment, GpuInfo  # noqa: E402

CACHE = Path(os.environ.get("CUDAMATRIX_WHEEL_CACHE") or REPO / ".wheel-members")
TORCHES = {"2.14.1": "CUDAMATRIX_TORCH_CUDA_PYTHON", "2.11.0": "CUDAMATRIX_TORCH211_PYTHON",
           "cpu": "CUDAMATRIX_TORCH_CPU_PYTHON"}
JUDGED = {"EXTENSION_ABI_MISMATCH", "EXTENSION_PIN_MISMATCH", "EXTENSION_CUDA_MISMATCH", "EXTENSION_VARIANT_CLASH",
          "EXTENSION_ARCH_UNSUPPORTED"}
SAME = {"TORCHVISION_MISMATCH": "EXTENSION_PIN_MISMATCH"}  # torch's companions: the same finding under its own code
TORCH_SYMBOL = re.compile(r"^(?:_ZN[KVR]*(?:3c10|2at|5torch)\d|_ZT[VIS]N[KVR]*(?:3c10|2at|5torch)\d|aoti_torch_)")
CUDA_NEEDED = re.compile(r"^lib(?:cudart|cublasLt|cublas|nvrtc)\.so\.(\d+)")
VARIANT = re.compile(r"^(.*)-cuda(\d+)x$")
DRIVER = Driver(version="580.95.05", cuda_version="13.0", status="ok")


@dataclass(frozen=True)
class Dist:
    """A real wheel's distribution and the members laid out (paths inside the wheel; RECORD names the rest)."""

    name: str
    version: str
    members: tuple[str, ...]
    ends: tuple[str, ...] = ()  # members kept by their ends only (see :func:`fetch_ends`), laid out like the others
    opens_one: str = ""  # one library per CUDA release, named by this prefix: only the one it opens is judged

    @property
    def files(self) -> tuple[str, ...]:
        return self.members + self.ends


@dataclass(frozen=True)
class Pair:
    dists: tuple[Dist, ...]
    torch: str  # a key of TORCHES
    gpu: tuple[str, str] | None = None  # (name, compute capability) stated, with DRIVER


def _cupy(name: str, version: str, tag: str) -> Dist:
    return Dist(name, version, (f"cupy_backends/cuda/libs/cublas.{tag}-x86_64-linux-gnu.so",))


XF29 = Dist("xformers", "0.0.29.post3", ("xformers/_C.so", "xformers/cpp_lib.json"))
XF35 = Dist("xformers", "0.0.35", ("xformers/_C.so",))
XF32 = Dist("xformers", "0.0.32.post1", ("xformers/_C.so", "xformers/cpp_lib.json"))
TV29 = Dist("torchvision", "0.29.2", ("torchvision/_C_stable.so",))  # the matrix pairs torch 2.14.1 with it
TV26 = Dist("torchvision", "0.26.0", ("torchvision/_C.so",))
CP12, CP13 = _cupy("cupy-cuda12x", "13.6.0", "cpython-313"), _cupy("cupy-cuda13x", "13.6.0", "cpython-313")
# onnxruntime-gpu's CUDA provider (284 MB in 1.31.1): its .dynamic and section headers sit in its last 20 KB, its
# program headers, .dynstr and .dynsym in its first; the 270 MB between them (.text, .nv_fatbin) are not kept
ORT_CUDA = "onnxruntime/capi/libonnxruntime_providers_cuda.so"
ORT126, ORT1311 = Dist("onnxruntime-gpu", "1.26.0", (), (ORT_CUDA,)), Dist("onnxruntime-gpu", "1.31.1", (), (ORT_CUDA,))
# bitsandbytes 0.43.1 to 0.49.2 open libbitsandbytes_cuda{major}{minor}.so of torch.version.cuda and no other file
# (bitsandbytes/cextension.py, get_cuda_bnb_library_path, at those tags): two of 0.49.2's eleven, one of 0.44.1's
BNB = "bitsandbytes/libbitsandbytes_cuda"
BNB49 = Dist("bitsandbytes", "0.49.2", (f"{BNB}118.so", f"{BNB}130.so"), opens_one=os.path.basename(BNB))
BNB44 = Dist("bitsandbytes", "0.44.1", (f"{BNB}125.so",), opens_one=os.path.basename(BNB))

PAIRS = [
    Pair((XF29,), "2.14.1"), Pair((XF29,), "2.11.0"), Pair((XF29,), "cpu"),
    Pair((XF32,), "2.14.1"), Pair((XF32,), "2.11.0"), Pair((XF35,), "2.14.1"), Pair((XF35,), "2.11.0"),
    Pair((TV29,), "2.14.1"), Pair((TV29,), "2.11.0"), Pair((TV29,), "cpu"),
    Pair((TV26,), "2.11.0"), Pair((TV26,), "2.14.1"),
    Pair((CP12,), "2.14.1"), Pair((CP12,), "2.11.0"), Pair((CP12,), "cpu"),
    Pair((CP13,), "2.14.1"), Pair((CP13,), "2.11.0"),
    Pair((CP12, CP13), "2.14.1"), Pair((CP12, CP13), "2.11.0"),
    Pair((XF29,), "2.14.1", ("Tesla M60", "5.2")), Pair((XF29,), "2.14.1", ("NVIDIA H100 80GB HBM3", "9.0")),
    Pair((TV29,), "2.14.1", ("Tesla V100-SXM2-16GB", "7.0")), Pair((TV29,), "2.14.1", ("NVIDIA A100-SXM4-80GB", "8.0")),
    Pair((TV26,), "2.11.0", ("Tesla M60", "5.2")),
    Pair((ORT126,), "2.14.1"), Pair((ORT1311,), "2.14.1"), Pair((ORT126,), "2.11.0"), Pair((ORT1311,), "2.11.0"),
    Pair((BNB49,), "2.14.1"), Pair((BNB49,), "2.11.0"), Pair((BNB44,), "2.14.1"),
]


# --- the members of real wheels ------------------------------------------------------------------------------------

def fetch(dist: Dist) -> Path:
    """A folder holding the dist's METADATA, WHEEL, RECORD and members under their base names (the layout of
    tests/support/realwheels.py, so both share one cache)."""
    meta = f"{dist.name.replace('-', '_')}-{dist.version}.dist-info"
    wanted = [f"{meta}/METADATA", f"{meta}/WHEEL", f"{meta}/RECORD", *dist.files]
    folder = CACHE / f"{dist.name}-{dist.version}"
    missing = [m for m in wanted if not (folder / os.path.basename(m)).exists()]
    if not missing:
        return folder
    client = IndexClient(pip_default_index(), member_max=2 << 30)
    f = discover.pick(discover.releases(client.project(dist.name)).get(Version(dist.version), []))
    if f is None:
        raise IndexReadError(f"{dist.name}=={dist.version}: no linux x86_64 wheel on the index")
    folder.mkdir(parents=True, exist_ok=True)
    for member in missing:
        tmp = folder / f"{os.path.basename(member)}.{os.getpid()}.part"
        if member in dist.ends:
            fetch_ends(client, f, member, tmp)
        else:
            got = client.member(f, member)
            if got is None:
                raise IndexReadError(f"{f.filename} has no member {member}")
            tmp.write_bytes(got[1])
        tmp.rename(folder / os.path.basename(member))
    return folder


HEAD, TAIL, CHUNK = 1 << 20, 1 << 16, 16 << 20


def fetch_ends(client: IndexClient, f: IndexFile, member: str, dest: Path) -> None:
    """``member`` of the remote wheel ``f`` written to ``dest`` as a sparse file of its real size holding only its
    first MiB and last 64 KiB at their offsets (the rest reads as zeros and takes no disk): a shared object's ELF
    and program headers, ``.dynstr``, ``.dynsym`` and GNU hash table lie in its head, its ``.dynamic`` and
    section headers in its tail, which is all ``readelf -d`` and detect's DT_NEEDED read. A deflated member is
    inflated as it streams in (range reads of 16 MiB): read once, kept in the cache, never held whole."""
    url = f.url.split("#")[0]
    tail, total = client._range(url, None, EOCD_MAX)
    read = client._reader(url)
    found = next((m for m in _central_directory(read, total if total >= 0 else len(tail), tail) if m[0] == member),
                 None)
    if found is None:
        raise IndexReadError(f"{f.filename} has no member {member}")
    _name, method, csize, off = found
    hn, he = struct.unpack("<HH", read(off, off + 29)[26:30])
    start = off + 30 + hn + he
    if method not in (0, 8):
        raise IndexReadError(f"{f.filename}:{member}: zip compression method {method}")
    inflate = zlib.decompressobj(-15) if method == 8 else None
    head, end, size = bytearray(), bytearray(), 0
    for at in range(start, start + csize, CHUNK):
        raw = read(at, min(at + CHUNK, start + csize) - 1)
        data = inflate.decompress(raw) if inflate else raw
        size += len(data)
        if len(head) < HEAD:
            head += data[:HEAD - len(head)]
        end = (end + data)[-TAIL:]
    if inflate:
        rest = inflate.flush()
        size += len(rest)
        end = (end + rest)[-TAIL:]
    with open(dest, "wb") as out:
        out.write(head)
        out.seek(size - len(end))  # a member under 1 MiB + 64 KiB: the same bytes written twice
        out.write(end)
        out.truncate(size)


@cache
def torch_site(key: str) -> Path | None:
    python = os.environ.get(TORCHES[key])
    if not python:
        return None
    out = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, timeout=60, check=True)
    return Path(out.stdout.strip())


def lay_out(site: Path, torch: Path, dists: tuple[Dist, ...]) -> None:
    """A site-packages holding the real torch (linked) and the dists' members (linked from the cache)."""
    for name in os.listdir(torch):
        if name == "torch" or (name.startswith("torch-") and name.endswith(".dist-info")):
            os.symlink(torch / name, site / name)
    for dist in dists:
        folder = fetch(dist)
        meta = site / f"{dist.name.replace('-', '_')}-{dist.version}.dist-info"
        meta.mkdir()
        for name in ("METADATA", "WHEEL", "RECORD"):
            shutil.copy(folder / name, meta / name)
        for member in dist.files:
            (site / os.path.dirname(member)).mkdir(parents=True, exist_ok=True)
            if os.path.lexists(site / member):
                os.unlink(site / member)
            os.symlink(folder / os.path.basename(member), site / member)


# --- what the files say, with nm, readelf, packaging and the fatbin headers ---------------------------------------

def _nm(path: Path, *flags: str) -> list[str]:
    out = subprocess.run(["nm", "-D", *flags, str(path)], capture_output=True, text=True, timeout=300)
    return out.stdout.splitlines()


@cache
def torch_defined(lib: Path) -> frozenset[str]:
    """Every symbol a library of torch/lib defines (``nm -D --defined-only``), version suffixes cut."""
    names: set[str] = set()
    for so in sorted(lib.iterdir()):
        if ".so" in so.name:
            names.update(line.split()[-1].split("@")[0] for line in _nm(so, "--defined-only") if line.strip())
    return frozenset(names)


def torch_version(site: Path) -> tuple[str, str | None]:
    """(torch's version from its dist-info, its CUDA from torch/version.py or None)."""
    meta = next(site.glob("torch-*.dist-info"))
    version = meta.name[len("torch-"):-len(".dist-info")]
    text = (site / "torch" / "version.py").read_text()
    m = re.search(r"^cuda(?:: \S+)? = '([\d.]+)'", text, re.M)
    return version, m.group(1) if m else None


def expected(site: Path, pair: Pair) -> tuple[set[str], list[str]]:
    """The codes the files imply and the evidence, made without doctor's code."""
    version, cuda = torch_version(site)
    defined = torch_defined((site / "torch" / "lib").resolve())
    codes: set[str] = set()
    evidence: list[str] = []
    for dist in pair.dists:
        meta = site / f"{dist.name.replace('-', '_')}-{dist.version}.dist-info" / "METADATA"
        for line in meta.read_text(errors="replace").splitlines():
            if not line.startswith("Requires-Dist: torch") or "extra" in line:
                continue
            try:
                req = Requirement(line.split(":", 1)[1].strip())
            except InvalidRequirement:
                continue
            if req.name == "torch" and (req.marker is None or req.marker.evaluate()) and req.specifier and \
                    not req.specifier.contains(Version(version).base_version, prereleases=True):
                codes.add("EXTENSION_PIN_MISMATCH")
                evidence.append(f"Requires-Dist {req}")
        record = site / os.path.dirname(dist.files[0]) / "cpp_lib.json"
        if record.exists():
            evidence.append(f"cpp_lib.json: built for torch {json.loads(record.read_text())['version']['torch']}")
        for member in _opened(dist, cuda, evidence, codes):
            so = site / member
            if not member.endswith(".so"):
                continue
            need = [ln.split()[-1] for ln in _nm(so, "--undefined-only") if " U " in ln]
            torch_need = [n.split("@")[0] for n in need if TORCH_SYMBOL.match(n)]
            gone = [n for n in torch_need if n not in defined]
            if gone:
                codes.add("EXTENSION_ABI_MISMATCH")
                evidence.append(f"nm: {len(gone)} of {len(torch_need)} torch symbols undefined ({gone[0]})")
            elif torch_need:
                evidence.append(f"nm: all {len(torch_need)} torch symbols defined")
            dyn = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, timeout=60).stdout
            for soname in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn):
                m = CUDA_NEEDED.match(soname)
                if m and cuda and m.group(1) != cuda.split(".")[0]:
                    codes.add("EXTENSION_CUDA_MISMATCH")
                    evidence.append(f"NEEDED {soname}, torch CUDA {cuda}")
                elif m:
                    evidence.append(f"NEEDED {soname}, torch CUDA {cuda or 'none (a CPU build)'}")
            if pair.gpu:
                sass, ptx = fatbin_archs(so.resolve())
                if (sass or ptx) and not _covered(sass, ptx, pair.gpu[1]):
                    codes.add("EXTENSION_ARCH_UNSUPPORTED")
                    evidence.append(f"fatbin SASS {','.join(sorted(sass, key=_cc))} PTX "
                                    f"{','.join(sorted(ptx, key=_cc)) or '-'}, GPU {pair.gpu[1]}")
    heads: dict[str, set[str]] = {}
    for dist in pair.dists:
        if m := VARIANT.match(dist.name):
            heads.setdefault(m.group(1), set()).add(m.group(2))
    if any(len(majors) > 1 for majors in heads.values()):
        codes.add("EXTENSION_VARIANT_CLASH")
        evidence.append("two -cudaNNx variants of one package")
    return codes, evidence


def _opened(dist: Dist, cuda: str | None, evidence: list[str], codes: set[str]) -> tuple[str, ...]:
    """The members the package opens: all, or of one library per CUDA release the one named by torch's CUDA (none
    without a CUDA torch); a missing one is EXTENSION_CUDA_MISMATCH."""
    if not dist.opens_one:
        return dist.files
    if cuda is None:
        return tuple(m for m in dist.files if not os.path.basename(m).startswith(dist.opens_one))
    want = dist.opens_one + "".join(cuda.split(".")[:2]) + ".so"
    kept = tuple(m for m in dist.files if not os.path.basename(m).startswith(dist.opens_one)
                 or os.path.basename(m) == want)
    if not any(os.path.basename(m) == want for m in kept):
        codes.add("EXTENSION_CUDA_MISMATCH")
        evidence.append(f"no {want} among its files, torch CUDA {cuda}")
    return kept


def _cc(c: str) -> tuple[int, int]:
    major, minor = c.split(".")
    return int(major), int(minor)


def _covered(sass: set[str], ptx: set[str], cc: str) -> bool:
    major, minor = _cc(cc)
    return any(_cc(a)[0] == major and _cc(a)[1] <= minor for a in sass) or any(_cc(p) <= (major, minor) for p in ptx)


# --- what doctor finds ---------------------------------------------------------------------------------------------

def found(site: Path, pair: Pair) -> set[str]:
    raw = _pyprobe.collect([str(site)])
    side = python_env.build(raw)
    env = Environment(origin="file", python=side.python, packages=side.packages, frameworks=side.frameworks,
                      requirements=side.requirements)
    env.extensions = extensions.scan(side.candidates, side.python.site_packages)
    if pair.gpu:
        env.driver = DRIVER
        env.gpus = [GpuInfo(index=0, name=pair.gpu[0], compute_capability=pair.gpu[1])]
    return {SAME.get(f.code, f.code) for f in diagnose(env, load_matrix()) if SAME.get(f.code, f.code) in JUDGED}


@dataclass
class Row:
    extension: str
    torch: str
    gpu: str
    expected: list[str] = field(default_factory=list)
    found: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    skipped: str | None = None

    @property
    def right(self) -> bool:
        return self.skipped is None and self.expected == self.found


def run_pair(pair: Pair, work: Path) -> Row:
    label = " + ".join(f"{d.name} {d.version}" for d in pair.dists)
    row = Row(label, pair.torch, f"{pair.gpu[0]} ({pair.gpu[1]})" if pair.gpu else "-")
    torch = torch_site(pair.torch)
    if torch is None:
        row.skipped = f"{TORCHES[pair.torch]} is not set"
        return row
    site = Path(tempfile.mkdtemp(dir=work)) / "site-packages"  # where detect looks for torch/lib
    site.mkdir()
    try:
        lay_out(site, torch, pair.dists)
    except (IndexReadError, OSError) as exc:
        row.skipped = f"members not read: {exc}"
        return row
    row.torch = torch_version(site)[0]
    codes, row.evidence = expected(site, pair)
    row.expected = sorted(codes)
    row.found = sorted(found(site, pair))
    return row


def table(rows: list[Row]) -> str:
    def words(codes: list[str]) -> str:
        return ", ".join(c.replace("EXTENSION_", "") for c in codes) or "none"

    out = ["| extension | torch | GPU | expected (files) | doctor | evidence |", "|---|---|---|---|---|---|"]
    for r in rows:
        if r.skipped:
            out.append(f"| {r.extension} | {r.torch} | {r.gpu} | skipped | | {r.skipped} |")
            continue
        mark = "" if r.right else " **DIFFERS**"
        out.append(f"| {r.extension} | {r.torch} | {r.gpu} | {words(r.expected)} | {words(r.found)}{mark} | "
                   f"{'; '.join(r.evidence) or '-'} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="the pairs whose extension names contain this")
    parser.add_argument("--json", action="store_true", help="one JSON object a pair instead of the table")
    args = parser.parse_args(argv)
    if shutil.which("nm") is None or shutil.which("readelf") is None:
        print("nm and readelf (binutils) are needed for the expected column", file=sys.stderr)
        return 2
    pairs = [p for p in PAIRS if args.only is None or any(args.only in d.name for d in p.dists)]
    with tempfile.TemporaryDirectory(prefix="extension-pairs-") as work:
        os.environ["XDG_CACHE_HOME"] = os.path.join(work, "xdg")  # no answer kept from another run, none left
        elfcache.forget()
        rows = [run_pair(p, Path(work)) for p in pairs]
    if args.json:
        for r in rows:
            print(json.dumps({**vars(r), "right": r.right}))
    else:
        ran = [r for r in rows if not r.skipped]
        print(table(rows))
        print(f"\n{sum(r.right for r in ran)} of {len(ran)} pairs right ({len(rows) - len(ran)} skipped)")
    ran = [r for r in rows if not r.skipped]
    if not ran:
        return 2
    return 0 if all(r.right for r in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
