"""The complete set a lock pins: the solved packages and every distribution they pull in, for each target's
Python, platform and glibc, each resolved to a wheel file (URL, sha256) by the installer against the real index
(:mod:`cudamatrix.lock.resolve` runs it and feeds its report here). Pure: no I/O, nothing printed.

Which wheels a target accepts (the packaging specifications "Platform compatibility tags" and PEP 600): a
glibc 2.Y system accepts ``manylinux_2_Z_<arch>`` for every Z <= Y, and the legacy aliases ``manylinux2014``
(glibc 2.17), ``manylinux2010`` (2.12) and ``manylinux1`` (2.5); x86_64 and i686 wheels go back to glibc 2.5,
the other architectures to 2.17, the oldest glibc with their manylinux policy. NVIDIA publishes
``nvidia-nccl-cu13==2.30.7`` only as ``manylinux_2_18`` (its index listing), so every minor must be listed.

pip evaluates a dependency's environment marker (``; python_version < "3.11"``) against the interpreter it
runs under, whatever ``--python-version`` and ``--platform`` say: :func:`diverging_markers` names every marker
whose answer differs on the target, so that such a resolution is refused rather than locked for the wrong
machine.
"""
from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from cudamatrix.errors import UsageError
from cudamatrix.names import canonical
from cudamatrix.schema import field, record

# PEP 508 marker values of each platform the solver knows
PLATFORM_MARKERS: dict[str, dict[str, str]] = {
    "linux_x86_64": {"os_name": "posix", "sys_platform": "linux", "platform_system": "Linux",
                     "platform_machine": "x86_64"},
    "linux_aarch64": {"os_name": "posix", "sys_platform": "linux", "platform_system": "Linux",
                      "platform_machine": "aarch64"},
    "win_amd64": {"os_name": "nt", "sys_platform": "win32", "platform_system": "Windows",
                  "platform_machine": "AMD64"},
}

# PEP 600: the legacy manylinux names and the glibc minor each stands for
_LEGACY = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
_GLIBC_TAG = re.compile(r"manylinux_(\d+)_(\d+)_")


@record(frozen=True)
class LockSpec:
    """One interpreter a lock is for: platform, Python minor, glibc (None off Linux), and what was assumed."""

    platform: str  # "linux_x86_64"
    python: str  # "3.11"
    glibc: str | None = None  # "2.35"
    assumed: tuple[str, ...] = field(default=())  # facts the target left open, and the value the lock took

    def describe(self) -> str:
        glibc = f", glibc {self.glibc}" if self.glibc else ""
        return f"Python {self.python} on {self.platform}{glibc}"

    def marker(self) -> str:
        """The PEP 508 marker that holds exactly where this lock applies (pylock.toml's ``environments``)."""
        values = PLATFORM_MARKERS.get(self.platform, {})
        parts = [f'{k} == "{values[k]}"' for k in ("sys_platform", "platform_machine") if k in values]
        return " and ".join(parts + [f'python_version == "{self.python}"'])

    def tags(self) -> list[str]:
        """The platform tags this interpreter accepts, most preferred first (pip's ``--platform`` values)."""
        return platform_tags(self.platform, self.glibc)


def platform_tags(platform: str, glibc: str | None) -> list[str]:
    """Every platform tag a ``platform`` machine with ``glibc`` ("2.35") accepts, newest glibc first.
    Raises UsageError for a platform the lock cannot resolve for, or a Linux one without a glibc."""
    if platform == "win_amd64":
        return ["win_amd64"]
    arch = platform.removeprefix("linux_")
    if not platform.startswith("linux_") or arch not in ("x86_64", "aarch64"):
        raise UsageError(f"cannot lock for platform {platform!r}", hint="linux_x86_64 | linux_aarch64 | win_amd64")
    major, minor = _glibc_pair(glibc)
    floor = 5 if arch in ("x86_64", "i686") else 17
    tags = []
    for n in range(minor, floor - 1, -1) if major == 2 else ():
        tags.append(f"manylinux_2_{n}_{arch}")
        legacy = _LEGACY.get(n)
        if legacy and (n == 17 or arch in ("x86_64", "i686")):
            tags.append(f"{legacy}_{arch}")
    return tags + [platform]


def _glibc_pair(glibc: str | None) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)\.(\d+)", (glibc or "").strip())
    if not m:
        raise UsageError(f"--glibc {glibc!r} is not a glibc version", hint="e.g. --glibc 2.35 (ldd --version)")
    return int(m.group(1)), int(m.group(2))


def check_glibc(glibc: str | None) -> str | None:
    """``glibc`` as given ("2.35"), or None. Raises UsageError when it is not MAJOR.MINOR."""
    if glibc is None:
        return None
    major, minor = _glibc_pair(glibc)
    return f"{major}.{minor}"


def glibc_of(tags: list[str]) -> str | None:
    """The glibc of an interpreter from its supported wheel tags (the detect probe lists
    ``manylinux_2_36_x86_64`` first on a glibc 2.36 machine); None when no manylinux tag is there."""
    found = [(int(m.group(1)), int(m.group(2))) for m in (_GLIBC_TAG.search(t) for t in tags) if m]
    return f"{max(found)[0]}.{max(found)[1]}" if found else None


@record(frozen=True)
class LockedFile:
    """One distribution resolved to the wheel the installer would fetch for one LockSpec."""

    name: str
    version: str
    url: str
    sha256: str
    index: str | None = None

    @property
    def location(self) -> str:
        """The URL without its fragment (``#sha256=...``: the hash is written on its own)."""
        return urlsplit(self.url)._replace(fragment="").geturl()

    @property
    def filename(self) -> str:
        """The wheel's file name (PEP 751 ``packages.wheels.name``): the last segment of the URL's path,
        percent-decoded (``torch-2.5.1%2Bcpu-...whl`` -> ``torch-2.5.1+cpu-...whl``), without query or fragment."""
        return unquote(urlsplit(self.url).path.rsplit("/", 1)[-1])


def is_local(url: str) -> bool:
    """A ``file:`` URL or a plain path (pip reads both as local sources)."""
    scheme = urlsplit(url).scheme.lower()
    return scheme in ("", "file") or len(scheme) == 1  # "C:/wheels": a drive letter, not a scheme


@record
class Locked:
    """One distribution of the complete set: its version and the file for each LockSpec (one per distinct file)."""

    name: str
    version: str
    files: list[LockedFile] = field(default_factory=list)

    def pin(self) -> str:
        return f"{self.name}=={self.version}"


@record
class Closure:
    """The complete set: the LockSpecs it holds for, its distributions sorted by name, and who resolved it."""

    specs: list[LockSpec]
    packages: list[Locked]
    resolver: str = "pip"  # "pip 25.2"


def from_report(report: dict, indexes: list[str] | None = None) -> list[LockedFile]:
    """LockedFiles from a ``pip install --dry-run --report`` document (pip's installation report format).
    ``indexes``: the index URLs given to pip; a file's index is the one its URL shares a host with.
    Raises UsageError when a file comes without a sha256 (a lock names each file by its hash)."""
    out = []
    for item in report.get("install", []):
        info = item.get("download_info") or {}
        archive = info.get("archive_info") or {}
        hashes = dict(archive.get("hashes") or {})
        legacy = archive.get("hash") or ""  # pip 22.2 wrote only "sha256=<hex>"
        if "sha256" not in hashes and legacy.startswith("sha256="):
            hashes["sha256"] = legacy.split("=", 1)[1]
        meta = item.get("metadata") or {}
        if not info.get("url") or not meta.get("name"):
            raise UsageError("the installer's report names no file for "
                             f"{meta.get('name') or 'a distribution'}", hint="pip >= 22.2 writes a full report")
        if "sha256" not in hashes:
            raise UsageError(f"no sha256 for {info['url']}: the index gives none and the installer did not "
                             "download it", hint="use an index that publishes file hashes (PEP 503 #sha256=)")
        sha256 = _sha256(hashes["sha256"], info["url"])
        index = next((i for i in indexes or [] if _host(i) == _host(info["url"])), None)
        out.append(LockedFile(_canon(meta["name"]), meta["version"], info["url"], sha256, index))
    return sorted(out, key=lambda f: f.name)


_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


def _sha256(text: object, url: str) -> str:
    """The sha256 the index gave for a file, lowercase. Raises UsageError, naming the file, for anything but 64
    hexadecimal digits: the text goes into the lock, where a crafted one could add options or lines."""
    if isinstance(text, str) and _SHA256.fullmatch(text):
        return text.lower()
    url = str(url)
    name = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    raise UsageError(f"{name}: the index gave {str(text)[:80]!r} as its sha256, which is not 64 hexadecimal digits; "
                     f"no lock was written", hint=f"check the index that serves {url[:200]!r}")


def _host(url: str) -> str:
    return urlsplit(url).netloc.lower()


def _canon(name: str) -> str:
    return canonical(name)


def merge(resolved: list[tuple[LockSpec, list[LockedFile]]], resolver: str = "pip") -> Closure:
    """One Closure from one resolution per LockSpec. Raises UsageError when two targets need different versions
    of one distribution (one requirements file pins one version) or one target lacks what another needs."""
    by_name: dict[str, Locked] = {}
    for spec, files in resolved:
        for f in files:
            got = by_name.setdefault(f.name, Locked(f.name, f.version))
            if got.version != f.version:
                raise UsageError(f"the targets need different versions of {f.name} ({got.version}, and {f.version} "
                                 f"for {spec.describe()}): one lock pins one version",
                                 hint="lock each target on its own (one -o per machine, or lock --per-class)")
            if f not in got.files:
                got.files.append(f)
    names = [{f.name for f in files} for _, files in resolved]
    if any(n != names[0] for n in names[1:]):
        odd = sorted(set().union(*names) - names[0].intersection(*names[1:]))
        raise UsageError(f"the targets need different sets: {', '.join(odd)} only on some of them",
                         hint="lock each target on its own (one -o per machine, or lock --per-class)")
    return Closure([s for s, _ in resolved], sorted(by_name.values(), key=lambda p: p.name), resolver)


def _target_environments(spec: LockSpec) -> list[dict[str, str]]:
    """The target's marker environment, twice: the facts a LockSpec does not know (patch level, kernel release)
    filled once low and once high, so that a marker reading them answers differently and shows up."""
    envs = []
    for patch, release in (("0", "0"), ("99", "999")):
        env = dict(PLATFORM_MARKERS.get(spec.platform, {}))
        env.update({"python_version": spec.python, "python_full_version": f"{spec.python}.{patch}",
                    "implementation_name": "cpython", "platform_python_implementation": "CPython",
                    "implementation_version": f"{spec.python}.{patch}", "platform_release": release,
                    "platform_version": release})
        envs.append(env)
    return envs


def _answers(marker, extras: list[str], envs: list[dict[str, str]]) -> set[bool | None]:
    """What ``marker`` says for any of ``extras`` in each environment ({}: the running interpreter's)."""
    out: set[bool | None] = set()
    for env in envs:
        try:
            out.add(any(marker.evaluate({**env, "extra": e}) for e in extras or [""]))
        except Exception:  # a marker packaging cannot compare on these values: its answer is unknown
            out.add(None)
    return out


def diverging_markers(report: dict, requirements: list[str], spec: LockSpec) -> list[str]:
    """The requirements (the top-level ones and each reported distribution's ``Requires-Dist``) whose marker
    answers differently on ``spec`` than on this interpreter, which pip evaluated it against, or depends on a
    fact of the target the lock does not know."""
    from packaging.requirements import InvalidRequirement, Requirement

    edges: list[tuple[str, str, list[str]]] = [("the request", r, []) for r in requirements]
    for item in report.get("install", []):
        meta = item.get("metadata") or {}
        owner = f"{meta.get('name')} {meta.get('version')}"
        edges += [(owner, r, list(item.get("requested_extras") or [])) for r in meta.get("requires_dist") or []]
    envs = _target_environments(spec)
    out = []
    for owner, text, extras in edges:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue  # pip itself refused or skipped it; nothing this check can add
        if req.marker is None:
            continue
        target, here = _answers(req.marker, extras, envs), _answers(req.marker, extras, [{}])
        if len(target) > 1 or target != here:
            out.append(f"{owner}: {text}")
    return out
