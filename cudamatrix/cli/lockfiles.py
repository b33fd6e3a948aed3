"""What a lock file holds, for `lock` and `lock --per-class` (:mod:`.lock_cmd`, :mod:`.fleet_cmd`): the writer of
each format, and the credentials taken out of its index URLs."""
from __future__ import annotations


def lock_writer(fmt: str, pins_only: bool, glibc: str | None, environments=None, name: str | None = None):
    """``write(solution, targets, passthrough) -> text`` for ``fmt``: the complete set unless ``pins_only``
    (requirements) or the format holds no files (uv). ``environments``: where the targets came from (their
    glibc), by target name; ``name``: the file name the install hint names."""
    from cudamatrix.solve.lockfile import requirements_txt, uv_project

    if fmt == "uv":
        return uv_project
    if pins_only:
        return requirements_txt
    default = "pylock.toml" if fmt == "pylock" else "requirements.txt"

    def write(solution, targets, passthrough) -> str:
        from cudamatrix.install.locking import lock_closure, lock_specs
        from cudamatrix.solve.lockfile import closure_header, lock_header
        from cudamatrix.solve.pylock import pylock_toml

        envs = [(environments or {}).get(t.name) for t in targets]
        closure = lock_closure(solution, list(passthrough), lock_specs(targets, envs, glibc))
        if fmt == "pylock":
            return pylock_toml(closure, lock_header(solution, targets) + closure_header(closure, name or default))
        return requirements_txt(solution, targets, passthrough, closure, name or default)

    return write


CREDENTIALS_NOTE = ("the credentials in the index URLs were left out of the lock (a file keeps no secret): "
                    "pip and uv read them from ~/.netrc or a keyring at install time")


def without_credentials(text: str) -> tuple[str, list[str]]:
    """A lock text without the user part of any URL in it, and the note saying so when one was there."""
    from cudamatrix.safe.text import has_credentials, strip_credentials

    return (strip_credentials(text), [CREDENTIALS_NOTE]) if has_credentials(text) else (text, [])
