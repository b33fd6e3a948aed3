"""The live probes' helpers: a probe run in a background thread, and a timer of named steps. Loaded by
:func:`cudamatrix.detect.detect` only (reading a pasted report needs neither threads nor timings)."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any


class Background(threading.Thread):
    """Run one independent probe while the main thread does the others (they wait on subprocesses)."""

    def __init__(self, fn, *args) -> None:
        super().__init__(daemon=True)
        self.fn, self.args = fn, args
        self.result: Any = None
        self.exc: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.result = self.fn(*self.args)
        except BaseException as exc:  # re-raised in the caller's thread by value()
            self.exc = exc

    def value(self):
        self.join()
        if self.exc is not None:
            raise self.exc
        return self.result


class Timer:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = round((time.perf_counter() - start) * 1000.0, 2)
