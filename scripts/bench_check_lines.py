#!/usr/bin/env python3
"""Benchmark ``check -r`` on long requirements files (medians of several runs, each a fresh
``python -m cudamatrix`` process) against a PEP 503 index on loopback.

Every line names a distribution the matrix does not know (``pkg-00001==1.0`` ...), so each distinct name is
asked of the index; the file also pins torch, so the check solves. The index is a small threaded HTTP server in
this process (it lists ``pkg-*`` and nothing else, as a real index answers 200 or 404), with pip's own
configuration switched off so that only it is asked. ``--delay`` adds that many milliseconds to every answer
(an index across a network rather than on loopback).

Usage: python scripts/bench_check_lines.py [-n 5] [--lines 1000 10000] [--delay 0] [--timeout 600]
"""
from __future__ import annotations

import os as _os

# Measure what users get: Python writes bytecode caches by default (see bench_solve.py).
_os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TARGET = ["--driver", "580.65.06", "--gpu", "H100", "--python", "3.12"]


def serve(delay_s: float) -> ThreadingHTTPServer:
    """A loopback PEP 503 index listing every project named ``pkg-*`` (one wheel each)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real indexes answer

        def log_message(self, *args):
            pass

        def do_GET(self):
            if delay_s:
                time.sleep(delay_s)
            parts = [p for p in self.path.split("?")[0].split("/") if p]
            project = parts[-1] if len(parts) == 2 else ""
            if not project.startswith("pkg-"):
                body, code = b"not found\n", 404
            else:
                name = project.replace("-", "_")
                body = f'<a href="/files/{name}-1.0-py3-none-any.whl">{name}-1.0-py3-none-any.whl</a>\n'.encode()
                code = 200
            self.send_response(code)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request, client_address):  # a client that hangs up early is not news
            pass

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def requirements(lines: int) -> str:
    return "torch==2.5.1\n" + "".join(f"pkg-{i:05d}==1.0\n" for i in range(lines - 1))


def timed(argv: list[str], env: dict[str, str], n: int, timeout: float) -> tuple[float | None, int | None]:
    """(median seconds, last exit status); (None, None) when a run did not finish within ``timeout``."""
    samples, code = [], None
    for _ in range(n):
        start = time.perf_counter()
        try:
            code = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return None, None
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), code


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--lines", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--delay", type=float, default=0.0, help="milliseconds added to every index answer")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one run may take")
    args = ap.parse_args()
    server = serve(args.delay / 1000)
    index = f"http://127.0.0.1:{server.server_address[1]}/simple"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update({"PIP_INDEX_URL": index, "PIP_CONFIG_FILE": os.devnull})
    cm = [sys.executable, "-m", "cudamatrix"]
    print(f"medians of {args.n} runs (fresh processes), index on loopback, {args.delay:g} ms a request")
    with tempfile.TemporaryDirectory() as tmp:
        for lines in args.lines:
            path = Path(tmp) / f"requirements-{lines}.txt"
            path.write_text(requirements(lines))
            argv = cm + ["check", "-r", str(path), *TARGET]
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=args.timeout)  # warm-up: bytecode, page cache
            seconds, code = timed(argv, env, args.n, args.timeout)
            shown = f"{seconds:8.2f} s" if seconds is not None else f"> {args.timeout:g} s (killed)"
            print(f"  check -r, {lines:>6} lines  {shown}  (exit {code})", flush=True)
    server.shutdown()


if __name__ == "__main__":
    main()
