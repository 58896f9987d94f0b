"""Optimizers registered by the plugin: ``fused_adamw``."""

from . import fused_adamw  # noqa: F401  (registration)
