"""What every nvidia-smi parser shares: the reading it returns and the small value readers."""
from __future__ import annotations

from cudamatrix.detect.text import clean
from cudamatrix.models import Driver, GpuInfo
from cudamatrix.safe.text import lazy
from cudamatrix.schema import field, record

BUS = lazy(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d")
_VERSION = lazy(r"\d{1,9}(?:\.\d{1,9}){1,4}")


@record
class SmiReading:
    """What one nvidia-smi text said. ``notes`` are the things it could not read."""

    driver: Driver = field(default_factory=Driver)
    gpus: list[GpuInfo] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    found: bool = False  # the text was recognisably nvidia-smi output


def num(value: str | None) -> int | None:
    """The leading integer of "16160MiB" / " 4 MiB"; None when there is none."""
    if value is None:
        return None
    digits = value.strip()[:12]
    n = len(digits) - len(digits.lstrip("0123456789"))
    return int(digits[:n]) if n else None


def version(value: str | None) -> str | None:
    """``value`` when it is a dotted version ("535.104.05"), else None."""
    if value and len(value) < 64 and _VERSION.fullmatch(value):
        return value
    return None


def lines_of(text: str | list[str]) -> list[str]:
    """A paste's normalised lines (or the lines given)."""
    return clean(text).split("\n") if isinstance(text, str) else text
