"""Lazy re-exports for package ``__init__`` modules (PEP 562).

Every process imports ``yarnflink`` (and, through the options registry, each package's
``__init__``); eager re-exports there would load the whole DataStream API, pandas and the
network stack into a TaskExecutor before it registers. A package instead names its public
re-exports, and they load on first attribute access::

    if TYPE_CHECKING:  # the static view: mypy and import-linter see the real imports
        from yarnflink.api.datastream import DataStream
    __getattr__, __dir__ = lazy_exports(__name__, {"yarnflink.api.datastream": ("DataStream",)})

``from package import Name`` works unchanged: the import system falls back to the module's
``__getattr__``. This module imports nothing of yarnflink.

Deferred imports run in whichever thread first needs them, often several task threads at once.
Two threads importing a package with internal import cycles (pandas) at the same moment can
fail with ``_DeadlockError``; ``load_module`` serializes such first imports on one lock.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType

__all__ = ["lazy_exports", "load_module"]

#: re-entrant: a module imported under it may itself load others lazily
_first_imports = threading.RLock()


def load_module(name: str) -> ModuleType:
    """``importlib.import_module(name)``, with first imports serialized across threads."""
    module = sys.modules.get(name)
    if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False):
        return module  # fully imported: no lock on the hot path
    with _first_imports:
        return importlib.import_module(name)


def lazy_exports(
    package: str, exports: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: each name of ``exports`` (module -> names)
    is imported from its module when first read, then cached in the package's namespace."""
    where: dict[str, str] = {}
    for module, names in exports.items():
        for name in names:
            if name in where:
                raise ValueError(f"{package}: {name!r} exported from both {where[name]} and {module}")
            where[name] = module

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(load_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
