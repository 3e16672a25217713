"""Import `mitmproxy.master` and a few addons without mitmproxy's whole default addon set.

`mitmproxy/master.py` imports `mitmproxy.addons.termlog`, and importing any submodule runs
the package's `__init__`, which imports all ~30 default addons (flask, ldap3, the
flowfilter grammar, ...): about half a second the embedded proxy never uses, since it adds
only the five addons it needs. `install()` registers `mitmproxy.addons` as a bare package
(the real folder as its `__path__`, so each submodule imports as usual) whose module
`__getattr__` imports a submodule by name or, for any other name (`default_addons`), runs
the real `__init__` into the package first: code that wants the full set still gets it.

It does nothing once `mitmproxy.addons` is imported: under stock mitmdump or mitmweb
(our addons loaded with `-s`) the package is already whole.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Callable
from typing import Any

PACKAGE = "mitmproxy.addons"


def install() -> None:
    """Make `mitmproxy.addons` a bare package unless it is imported already (then a no-op)."""
    if PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(PACKAGE)  # imports the light `mitmproxy/__init__.py`
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not the mitmproxy this was written for: let the normal import run
    package = importlib.util.module_from_spec(spec)  # sets __path__, __file__, __spec__
    package.__dict__["__getattr__"] = _on_demand(package, spec.loader)
    sys.modules[PACKAGE] = package
    parent, _, child = PACKAGE.rpartition(".")
    setattr(sys.modules[parent], child, package)


def _on_demand(package: types.ModuleType, loader: Any) -> Callable[[str], object]:
    """The package's `__getattr__`: a submodule by that name, else the real `__init__`'s."""
    state = {"whole": False}

    def attribute(name: str) -> object:
        if name.startswith("__"):  # probes like `__wrapped__` must not load anything
            raise AttributeError(name)
        try:
            return importlib.import_module(f"{PACKAGE}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{PACKAGE}.{name}":
                raise  # the submodule exists but one of its own imports is missing
        if not state["whole"]:
            state["whole"] = True
            loader.exec_module(package)  # the real __init__: every default addon
        try:
            return package.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}") from None

    return attribute
