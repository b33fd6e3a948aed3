"""Error classes and the documented exit-code table.

Every error the command line reports on purpose derives from :class:`CudamatrixError`
and carries its exit code. Anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

from enum import IntEnum
from typing import Any


class Exit(IntEnum):
    """Documented exit codes (docs/reference.md, "Exit codes", generated from :data:`EXIT_MEANING`)."""

    OK = 0
    PROBLEMS = 1  # findings of severity error, or requirements that do not fit
    USAGE = 2  # usage or input error: bad flags, unreadable files, malformed data
    NO_SOLUTION = 3  # no consistent set exists for the target and request
    INSTALL_FAILED = 4  # an install step failed; the environment was restored
    VERIFY_FAILED = 5  # the GPU verification ran and failed
    VERIFY_NOT_POSSIBLE = 6  # no usable GPU here: only the CPU path was checked


# What each exit code means, for the reference (docs/reference.md, generated from this table)
EXIT_MEANING: dict[Exit, str] = {
    Exit.OK: "ok",
    Exit.PROBLEMS: "problems found: doctor's errors, check's requirements that do not fit, fix cancelled or left "
                   "error findings it could not verify past, verify with no framework asked for installed "
                   "(NOT_INSTALLED: nothing was checked), or applied a change whose journal it could not complete",
    Exit.USAGE: "usage or input error: bad flags, unparseable requirements, unreadable or malformed files, --from "
                "files none of which holds a known tool's output, bad matrix data; fix without a terminal and "
                "without --yes; an interrupted fix whose journal asks for --resume or --rollback; fix --undo with "
                "no completed fix recorded, a set changed since, a starting wheel not kept, or a saved wheel or journal "
                "that cannot be trusted; another fix changing the same interpreter right now",
    Exit.NO_SOLUTION: "no consistent solution (the causes and the ways out are printed)",
    Exit.INSTALL_FAILED: "install failed; the environment was restored to the starting set (for fix --undo: to "
                         "the set before the undo); or refused before any change: files that cannot be fetched, not "
                         "enough disk",
    Exit.VERIFY_FAILED: "GPU verification failed (with the cause and the matching finding code)",
    Exit.VERIFY_NOT_POSSIBLE: "verification not possible here (no usable GPU); the CPU path of an installed framework was "
                              "still checked",
}


class CudamatrixError(Exception):
    """Base class: a message for people, an exit code, and optional structured detail."""

    exit_code: int = Exit.USAGE

    def __init__(self, message: str, *, hint: str | None = None, detail: Any = None,
                 exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.detail = detail
        if exit_code is not None:
            self.exit_code = exit_code

    def as_dict(self) -> dict:
        out: dict = {"type": type(self).__name__, "message": self.message}
        if self.hint:
            out["hint"] = self.hint
        if self.detail is not None:
            out["detail"] = self.detail
        return out


class UsageError(CudamatrixError):
    """Bad flags, bad requirement strings, unreadable input files."""

    exit_code = Exit.USAGE


class DataError(CudamatrixError):
    """A matrix data file is malformed: names the file and the dotted path of the bad value."""

    exit_code = Exit.USAGE


class NoSolution(CudamatrixError):
    """The solver found no consistent set: typed ``causes`` (the rule, its sentence, the machines it
    blocks), ``ways_out`` (the nearest changes that would give one) and the ``rejected`` candidates.

    ``detail`` is their JSON form (``data.causes``, ``data.ways_out``, ``data.rejected`` of the envelope), made
    from the records whenever it is read: one source, so a caller that keeps fewer ways out changes only
    ``ways_out``."""

    exit_code = Exit.NO_SOLUTION

    def __init__(self, message: str, *, causes: list[Any], ways_out: list[Any],
                 rejected: list[Any] | None = None, hint: str | None = None) -> None:
        self.causes: list[Any] = list(causes)  # models.Cause
        self.ways_out: list[Any] = list(ways_out)  # models.WayOut
        self.rejected: list[Any] = list(rejected or [])  # models.Rejection
        super().__init__(message, hint=hint)

    @property
    def detail(self) -> dict:
        """The JSON form of the causes, ways out and (the first 200) rejected candidates."""
        return {"causes": [c.to_dict() for c in self.causes], "ways_out": [w.to_dict() for w in self.ways_out],
                "rejected": [r.to_dict() for r in self.rejected[:200]]}

    @detail.setter
    def detail(self, value: Any) -> None:
        if value is not None:  # CudamatrixError.__init__ sets None: the detail is made from the records
            raise AttributeError("NoSolution.detail is made from causes, ways_out and rejected")


class InstallFailed(CudamatrixError):
    """An install step failed and the starting set was restored."""

    exit_code = Exit.INSTALL_FAILED


class VerifyFailed(CudamatrixError):
    exit_code = Exit.VERIFY_FAILED
