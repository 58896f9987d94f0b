"""Where fairseq binds ``convert_namespace_to_omegaconf``: the ``bf16_autocast`` mend wraps that
one function, and fairseq modules that imported it by name keep the object they bound, so it is
rebound in each of those places."""

from __future__ import annotations

import sys


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
