"""Test helpers: tiny stand-in wheels with real names and local versions, a PEP 503 simple index
served over HTTP on loopback (one thread, stops with the test), and throwaway virtual environments.

The wheels are built here with zipfile and hand-written METADATA / WHEEL / RECORD: nothing is
downloaded. The index can be told to die after serving N wheel files (an index that dies mid-way).
Opt-in: the JSON Simple API (PEP 691), PEP 658 ``.metadata`` files, HTTP range requests and TLS with a
throwaway self-signed certificate (made by the ``openssl`` command).
"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(folder: Path, name: str, version: str, *, requires: list[str] = (),
                files: dict[str, str | bytes] | None = None,
                corrupt: bool = False, tag: str = "py3-none-any", requires_python: str | None = None) -> Path:
    """Write ``<name>-<version>-py3-none-any.whl`` into ``folder`` and return its path.

    ``files``: extra payload (path in site-packages -> text, or bytes written as they are). ``corrupt``: flip a byte of the payload
    after the archive is written, so the metadata reads fine (resolution succeeds) but extraction
    fails with a CRC error at install time, after earlier packages of the same install went in.
    """
    folder.mkdir(parents=True, exist_ok=True)
    dist = re.sub(r"[-_.]+", "_", name)
    module = dist.lower()
    info = f"{dist}-{version}.dist-info"
    payload = dict(files or {})
    payload.setdefault(f"{module}/__init__.py", f'__version__ = "{version}"\n')
    payload[f"{module}/_payload.txt"] = "x" * 64 + "\n"  # the bytes ``corrupt`` flips
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", "Summary: test stand-in"]
    if requires_python:
        meta.append(f"Requires-Python: {requires_python}")
    meta += [f"Requires-Dist: {r}" for r in requires]
    members = dict(payload)
    members[f"{info}/METADATA"] = "\n".join(meta) + "\n"
    members[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: cudamatrix-tests\nRoot-Is-Purelib: true\nTag: {tag}\n"
    data = {p: t if isinstance(t, bytes) else t.encode() for p, t in members.items()}
    record = [f"{p},{_record_hash(b)},{len(b)}" for p, b in data.items()]
    members[f"{info}/RECORD"] = "\n".join(record + [f"{info}/RECORD,,"]) + "\n"
    path = folder / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if tag != "py3-none-any" else zipfile.ZIP_STORED) as zf:
        for p, t in members.items():
            zf.writestr(p, t)
    if corrupt:
        raw = bytearray(path.read_bytes())
        at = raw.index(b"x" * 64)
        raw[at] = ord("y")
        path.write_bytes(bytes(raw))
    return path


@dataclass
class LocalIndex:
    """A PEP 503 index of the wheels in ``folder``: ``/<anything>/<project>/`` lists the project's files
    (so ``/simple``, ``/whl/cu121`` and ``/whl/cpu`` all work), ``/files/<name>`` serves one."""

    folder: Path
    die_after_files: int | None = None  # after this many wheel downloads every request is cut off
    served: list[str] = field(default_factory=list)
    json_api: bool = False  # answer PEP 691 JSON to clients that ask for it
    metadata_for: tuple[str, ...] = ()  # project names whose wheels get a PEP 658 ``<wheel>.metadata`` file
    ranges: bool = False  # answer ``Range: bytes=`` requests with 206
    tls: bool = False  # serve https with a self-signed certificate; ``cafile`` names it
    cafile: Path | None = None
    query: str = ""  # appended to every file URL of a listing ("?sig=x": a signed URL, as some indexes serve)
    fragments: dict[str, str] = field(default_factory=dict)  # project -> fragment of its file URLs ("sha256=...")
    _server: ThreadingHTTPServer | None = None

    def files_served(self) -> int:
        return sum(1 for s in self.served if s.startswith("/files/"))

    def die_after(self, n: int) -> None:
        """Serve ``n`` more wheel files, then cut every request off."""
        self.die_after_files = self.files_served() + n

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    def _metadata_of(self, wheel: Path) -> bytes | None:
        with zipfile.ZipFile(wheel) as zf:
            for name in zf.namelist():
                if name.endswith(".dist-info/METADATA"):
                    return zf.read(name)
        return None

    def _href(self, wheel: str, project: str) -> str:
        frag = self.fragments.get(project)
        return f"/files/{quote(wheel)}{self.query}" + (f"#{frag}" if frag else "")

    def _listing(self, project: str, as_json: bool) -> tuple[bytes, str] | None:
        wheels = [w for w in sorted(self.folder.glob("*.whl")) if canonical(w.name.split("-")[0]) == project]
        if not wheels:
            return None
        with_meta = {w.name: hashlib.sha256(self._metadata_of(w) or b"").hexdigest()
                     for w in wheels if canonical(w.name.split("-")[0]) in self.metadata_for}
        if as_json:
            files = []
            for w in wheels:
                item = {"filename": w.name, "url": self._href(w.name, project), "hashes": {},
                        "size": w.stat().st_size}
                if w.name in with_meta:
                    item["core-metadata"] = {"sha256": with_meta[w.name]}
                files.append(item)
            doc = {"meta": {"api-version": "1.1"}, "name": project, "files": files}
            return json.dumps(doc).encode(), "application/vnd.pypi.simple.v1+json"
        links = []
        for w in wheels:
            meta = f' data-core-metadata="sha256={with_meta[w.name]}"' if w.name in with_meta else ""
            links.append(f'<a href="{html.escape(self._href(w.name, project))}"{meta}>{html.escape(w.name)}</a><br>')
        body = "<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n"
        return body.encode(), "text/html"

    def __enter__(self) -> LocalIndex:
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                if index.die_after_files is not None and index.files_served() >= index.die_after_files:
                    self.close_connection = True
                    self.connection.shutdown(2)  # the index went away mid-way
                    return
                index.served.append(self.path)
                parts = [p for p in self.path.split("?")[0].split("/") if p]
                if len(parts) == 2 and parts[0] == "files":
                    name = unquote(parts[1])
                    if name.endswith(".whl.metadata") and canonical(name.split("-")[0]) in index.metadata_for:
                        wheel = index.folder / name[: -len(".metadata")]
                        meta = index._metadata_of(wheel) if wheel.is_file() else None
                        return self._send(meta, "text/plain") if meta else self.send_error(404)
                    target = index.folder / name
                    if target.is_file():
                        return self._send(target.read_bytes(), "application/octet-stream")
                    return self.send_error(404)
                if parts:
                    as_json = index.json_api and "vnd.pypi.simple.v1+json" in (self.headers.get("Accept") or "")
                    got = index._listing(canonical(parts[-1]), as_json)
                    if got:
                        return self._send(*got)
                self.send_error(404)

            def do_HEAD(self):  # uv asks for a file's size before fetching it
                self._head_only = True
                try:
                    self.do_GET()
                finally:
                    self._head_only = False

            def _send(self, body: bytes, ctype: str) -> None:
                m = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range") or "")
                if index.ranges and m and (m.group(1) or m.group(2)):
                    size = len(body)
                    if m.group(1):
                        start, end = int(m.group(1)), min(int(m.group(2) or size - 1), size - 1)
                    else:  # a suffix: the last N bytes
                        start, end = max(0, size - int(m.group(2))), size - 1
                    part = body[start:end + 1]
                    self.send_response(206)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                    self.send_header("Content-Length", str(len(part)))
                    self.end_headers()
                    if not getattr(self, "_head_only", False):
                        self.wfile.write(part)
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                if not getattr(self, "_head_only", False):
                    self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if self.tls:
            self._server.socket = self._tls_context().wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True).start()  # shutdown() waits one poll: 20 ms, not 0.5 s
        return self

    def _tls_context(self):
        """A server context with a self-signed certificate for 127.0.0.1 (clients trust ``cafile``)."""
        import ssl

        key = self.folder.parent / f"{self.folder.name}-tls-key.pem"
        self.cafile = self.folder.parent / f"{self.folder.name}-tls-cert.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", str(key), "-out", str(self.cafile)],
                       check=True, capture_output=True, timeout=60)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(self.cafile), str(key))
        return ctx

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


def pip_env(index_url: str, cache_dir: Path) -> dict[str, str]:
    """Environment for pip in tests: this machine's pip configuration off, the loopback index as the
    default index (so nothing is fetched from outside), a private cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update({"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": index_url, "PIP_CACHE_DIR": str(cache_dir),
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PIP_DEFAULT_TIMEOUT": "5",
                "PIP_RETRIES": "0"})
    return env


def make_venv(path: Path, python: str = sys.executable) -> Path:
    """``python -m venv`` with pip (ensurepip ships it: no download). Returns the venv's interpreter."""
    subprocess.run([python, "-m", "venv", str(path)], check=True, timeout=300)
    return venv_python(path)


def venv_python(path: Path) -> Path:
    return path / "bin" / "python"


def copy_venv(template: Path, path: Path) -> Path:
    """A fresh copy of a template venv (faster than ensurepip each time)."""
    shutil.copytree(template, path, symlinks=True)
    return venv_python(path)


def pip_list(python: Path, env: dict[str, str]) -> list[dict]:
    """``pip list --format json`` of ``python``, sorted: the ground truth the rollback tests compare."""
    out = subprocess.run([str(python), "-m", "pip", "list", "--format", "json"], env=env, check=True,
                         capture_output=True, text=True, timeout=120).stdout
    return sorted(json.loads(out), key=lambda d: d["name"].lower())
