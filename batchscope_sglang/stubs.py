"""Stand-ins for modules SGLang imports at module level but never calls while scheduling (standard library only).

The same technique as SGLang's own ``sglang.test.test_utils.maybe_stub_sgl_kernel``: a meta-path finder answers
every import of the named top-level packages with a module whose attributes are ``MagicMock``s.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Iterable


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        from unittest.mock import MagicMock

        module.__getattr__ = lambda name: MagicMock()  # type: ignore[method-assign]


class _StubFinder(importlib.abc.MetaPathFinder):
    def __init__(self, names: frozenset[str]):
        self.names = names

    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in self.names:
            return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)
        return None


def stub_modules(names: Iterable[str]) -> None:
    """Answer imports of the top-level packages ``names`` (and their submodules) with stubs, unless importable."""
    missing = set()
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # an absent or a broken build (a CUDA-only wheel under CPU torch)
            sys.modules.pop(name, None)
            missing.add(name)
    if missing:
        sys.meta_path.insert(0, _StubFinder(frozenset(missing)))
