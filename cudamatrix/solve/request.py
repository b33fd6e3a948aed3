"""Request parsing: PEP 508 strings -> a Request grouped by framework family. No I/O."""
from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement

from cudamatrix.errors import UsageError
from cudamatrix.models import Environment
from cudamatrix.names import EXTENSIONS, EXTENSIONS_ON_TORCH, FAMILIES, canonical, family_of
from cudamatrix.schema import field, record


@record
class Request:
    """What the user asked for, grouped by framework family.

    The solver never changes a Request it is given: it works on :meth:`copy`."""

    requirements: list[Requirement]
    families: dict[str, list[Requirement]] = field(default_factory=dict)
    passthrough: list[Requirement] = field(default_factory=list)  # not a framework the matrix knows
    implicit: bool = False  # derived from what is installed, not typed by the user
    extensions: list[Requirement] = field(default_factory=list)  # solved with their framework (EXTENSIONS)
    carried: dict[str, str] = field(default_factory=dict)  # installed extensions an implicit request keeps: name -> version

    @property
    def texts(self) -> list[str]:
        return [str(r) for r in self.requirements]

    def copy(self) -> Request:
        """A copy whose lists and mapping can be changed without touching this one."""
        return Request(list(self.requirements), {k: list(v) for k, v in self.families.items()},
                       list(self.passthrough), self.implicit, list(self.extensions), dict(self.carried))

    def without(self, family: str) -> Request:
        """A copy without one family's requirements."""
        out = self.copy()
        out.families.pop(family, None)
        return out


def parse_request(texts: list[str], installed: Environment | None = None) -> Request:
    """PEP 508 strings -> Request. Empty: what is installed now; nothing installed: torch. Raises UsageError.

    An implicit request carries the installed packages built against one exact torch (vllm, xformers, sglang):
    torch moved without them breaks them, so they are solved with it, their installed release tried first."""
    implicit = False
    carried: dict[str, str] = {}
    if not texts:
        implicit = True
        names = []
        if installed is not None:
            # the families' main distributions and companions an implicit request re-solves (not jaxlib:
            # it follows jax)
            for dist in (*FAMILIES["torch"].distributions, "tensorflow", "jax"):
                if dist in installed.packages:
                    names.append(dist)
            carried = {n: installed.packages[n] for n in sorted(EXTENSIONS_ON_TORCH) if installed.packages.get(n)}
        texts = (names or ["torch"]) + list(carried)
    reqs = []
    for text in texts:
        try:
            reqs.append(Requirement(text))
        except InvalidRequirement as exc:
            raise UsageError(f"cannot parse requirement {text!r}: {exc}",
                             hint="write PEP 508 requirements, e.g. 'torch>=2.3' 'tensorflow==2.15.*'") from None
    request = Request(reqs, implicit=implicit, carried=carried)
    for req in reqs:
        fam = family_of(canonical(req.name))
        if fam:
            request.families.setdefault(fam, []).append(req)
        elif canonical(req.name) in EXTENSIONS and not req.url:  # a URL names its own wheel: passed as given
            request.extensions.append(req)
        else:
            request.passthrough.append(req)
    if "torch" not in request.families and any(canonical(r.name) in EXTENSIONS_ON_TORCH for r in request.extensions):
        request.families["torch"] = [Requirement("torch")]
    return request
