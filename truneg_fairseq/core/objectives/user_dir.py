"""Import a researcher's own package of objectives by its path, as ``fairseq-train --user-dir``
imports a plugin: the directory's basename is the module name, so the same directory serves
``fairseq-train --user-dir DIR`` and ``truneg-hf-train --user-dir DIR``."""

import importlib
import importlib.util
import os
import sys

from truneg_fairseq.errors import ObjectiveError


def import_user_dir(path: str):
    """Import ``path`` (a package directory with ``__init__.py``, or a ``.py`` file) under its
    basename, once; its objectives register as it is imported. Returns the module."""
    path = os.path.abspath(path)
    name = os.path.splitext(os.path.basename(path.rstrip(os.sep)))[0]
    if name in sys.modules:
        module = sys.modules[name]
        where = getattr(module, "__file__", None) or ""
        if os.path.dirname(where) == path or where == path:
            return module
        raise ObjectiveError(
            f"--user-dir {path}: a module named {name!r} is imported already (from {where or '?'}); "
            "rename the directory"
        )
    if os.path.isdir(path):
        init = os.path.join(path, "__init__.py")
        if not os.path.isfile(init):
            raise ObjectiveError(f"--user-dir {path}: no __init__.py in it (a package is needed)")
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[path])
    elif os.path.isfile(path) and path.endswith(".py"):
        spec = importlib.util.spec_from_file_location(name, path)
    else:
        raise ObjectiveError(
            f"--user-dir {path}: not found (give a package directory or a .py file that registers "
            "objectives)"
        )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    importlib.invalidate_caches()
    return module
