"""What a lock file holds, for `lock` and `lock --per-class` (:mod:`.lock_cmd`, :mod:`.fleet_cmd`): the writer of
each format, and the credentials taken out of its index URLs."""
from __future__ import annotations

from cudamatrix.lock.lockfile import (
    closure_header,
    local_sources,
    lock_header,
    refuse_local,
    requirements_txt,
    uv_project,
)
from cudamatrix.lock.pylock import pylock_toml
from cudamatrix.lock.resolve import lock_closure, lock_specs
from cudamatrix.safe.text import has_credentials, strip_credentials


class LockWriter:
    """``write(solution, targets, passthrough) -> text`` for one format: the complete set unless ``pins_only``
    (requirements) or the format holds no files (uv). ``environments``: where the targets came from (their
    glibc), by target name; ``name``: the file name the install hint names. A lock that would name a path of this
    machine (a ``file:`` index or wheel) is refused unless ``allow_local``; ``local`` collects the paths the
    written locks name."""

    def __init__(self, fmt: str, pins_only: bool, glibc: str | None, environments=None, name: str | None = None,
                 allow_local: bool = False) -> None:
        self.fmt, self.pins_only, self.glibc = fmt, pins_only, glibc
        self.environments = environments or {}
        self.name = name or ("pylock.toml" if fmt == "pylock" else "requirements.txt")
        self.allow_local = allow_local
        self.local: list[str] = []

    def _allowed(self, sources: list[str]) -> list[str]:
        if not self.allow_local:
            refuse_local(sources)
        self.local += [s for s in sources if s not in self.local]
        return sources

    def __call__(self, solution, targets, passthrough, find_links=()) -> str:
        passthrough, find_links = list(passthrough), list(find_links)
        if self.fmt == "uv" or self.pins_only:
            local = self._allowed(local_sources(solution))
            if self.fmt == "uv":
                return uv_project(solution, targets, passthrough, local=local, find_links=find_links)
            return requirements_txt(solution, targets, passthrough, local=local, find_links=find_links)
        envs = [self.environments.get(t.name) for t in targets]
        closure = lock_closure(solution, passthrough, lock_specs(targets, envs, self.glibc), find_links=find_links)
        local = self._allowed(local_sources(solution, closure))
        if self.fmt == "pylock":
            return pylock_toml(closure, lock_header(solution, targets, local) + closure_header(closure, self.name))
        return requirements_txt(solution, targets, passthrough, closure, self.name, local=local)


def lock_writer(fmt: str, pins_only: bool, glibc: str | None, environments=None, name: str | None = None,
                allow_local: bool = False) -> LockWriter:
    """The writer of ``fmt`` (:class:`LockWriter`)."""
    return LockWriter(fmt, pins_only, glibc, environments, name, allow_local)


CREDENTIALS_NOTE = ("the credentials in the index URLs were left out of the lock (a file keeps no secret): "
                    "pip and uv read them from ~/.netrc or a keyring at install time")


def without_credentials(text: str) -> tuple[str, list[str]]:
    """A lock text without the user part of any URL in it, and the note saying so when one was there."""
    return (strip_credentials(text), [CREDENTIALS_NOTE]) if has_credentials(text) else (text, [])
