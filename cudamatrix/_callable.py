"""Stage packages that are also their stage function: ``cudamatrix.solve(...)`` and ``cudamatrix.detect(...)``.

Importing a subpackage makes it the package attribute of the same name, which would hide the function the
public API promises; the module itself answers the call instead.
"""
from __future__ import annotations

import sys
import types


def callable_module(module_name: str, function_name: str) -> None:
    """Make ``sys.modules[module_name](...)`` call its attribute ``function_name``."""
    module = sys.modules[module_name]

    class _Module(types.ModuleType):
        def __call__(self, *args, **kwargs):
            return getattr(self, function_name)(*args, **kwargs)

    _Module.__name__ = f"{function_name}_module"
    module.__class__ = _Module
