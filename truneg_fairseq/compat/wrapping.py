"""How a mend puts its replacement of a fairseq (or torch) function in place.

:func:`wrap_once` is the one way the mends and :mod:`truneg_fairseq.training` install their
wrappers: each wrapper carries a marker attribute, checked before anything is replaced, so
installing a mend again (the plugin imported under another name, a second ``compat.install()``,
a test) leaves the wrapper as it is instead of wrapping it a second time; the function it
replaced stays reachable as the wrapper's ``__wrapped__``.

:func:`rebind_conversion`: the ``bf16_autocast`` mend wraps ``convert_namespace_to_omegaconf``,
and fairseq modules that imported it by name keep the object they bound, so it is rebound in
each of those places."""

from __future__ import annotations

import inspect
import sys
from typing import Any, Callable, Optional


def wrap_once(
    owner: Any,
    name: str,
    make_wrapper: Callable[[Any], Optional[Callable]],
    *,
    marker: str,
) -> bool:
    """Replace ``owner.name`` (a module's function, a class's method) by
    ``make_wrapper(original)``, unless the function there already carries ``marker``.

    ``make_wrapper`` is called only when nothing is installed yet; it may return None to install
    nothing (the fairseq at hand does not need the mend). The wrapper gets ``marker`` set to True
    and ``__wrapped__`` set to the original; a static method is put back as a static method.
    Returns whether the wrapper was installed."""
    original = getattr(owner, name)
    if getattr(original, marker, False):  # installed already
        return False
    wrapper = make_wrapper(original)
    if wrapper is None:
        return False
    setattr(wrapper, marker, True)
    wrapper.__wrapped__ = original
    if isinstance(inspect.getattr_static(owner, name), staticmethod):
        wrapper = staticmethod(wrapper)
    setattr(owner, name, wrapper)
    return True


def rebind_conversion(original, replacement) -> None:
    """Put ``replacement`` where fairseq's ``convert_namespace_to_omegaconf`` (``original``) is
    called: the module attribute and the modules that bound it by name at import (fairseq's
    checkpoint loading, and the command line that imported the plugin: ``fairseq_cli.train`` run
    as fairseq-train or as ``python -m fairseq_cli.train``, i.e. ``__main__``), which converts its
    arguments after importing the --user-dir."""
    from fairseq.dataclass import utils as dataclass_utils

    dataclass_utils.convert_namespace_to_omegaconf = replacement
    for name in (
        "fairseq.checkpoint_utils",
        "fairseq_cli.train",
        "fairseq_cli.validate",
        "__main__",
    ):
        module = sys.modules.get(name)
        if (
            module is not None
            and getattr(module, "convert_namespace_to_omegaconf", None) is original
        ):
            module.convert_namespace_to_omegaconf = replacement
