"""Models registered by the plugin: ``electra`` with archs electra_small/base/large."""

from . import electra  # noqa: F401  (registration)
