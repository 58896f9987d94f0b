"""hydra's notices about fairseq's use of its compose API are not printed
(``quiet_config_composition``).
"""

from __future__ import annotations

from .namespace_conversion import rebind_conversion

# hydra 1.3's notices for the calls fairseq 0.12 makes when it composes a config from command-line
# arguments (hydra.experimental's initialize/compose, no version_base, the "_group_" package
# header of fairseq's config files, schema matching by name, compose's strict flag): about fifteen
# lines on stderr per process that nothing here can act on
HYDRA_NOTICES = (
    r"\s*hydra\.experimental\.(initialize|compose)\(\) is no longer experimental",
    r"\s*The version_base parameter is not specified",
    r"\s*In '[^']*': Usage of deprecated keyword in package header",
    r"\s*'[^']*' is validated against ConfigStore schema with the same name",
    r"\s*The strict flag in the compose API is deprecated",
)


def quiet_config_composition() -> None:
    """Run fairseq's ``convert_namespace_to_omegaconf`` (the one place where fairseq 0.12 calls
    hydra's compose API: the plugin's scripts building a model from arguments, fairseq loading a
    checkpoint saved with ``args``) with exactly :data:`HYDRA_NOTICES` ignored, and only during
    that call; every other warning, there and elsewhere, is shown as before."""
    import functools
    import warnings

    from fairseq import checkpoint_utils  # noqa: F401  (imported, so that it is in sys.modules)
    from fairseq.dataclass import utils as dataclass_utils

    original = dataclass_utils.convert_namespace_to_omegaconf
    if getattr(original, "truneg_quiet", False):  # installed already
        return

    @functools.wraps(original)
    def convert_namespace_to_omegaconf(args):
        with warnings.catch_warnings():
            for message in HYDRA_NOTICES:
                warnings.filterwarnings("ignore", message=message, category=UserWarning)
            return original(args)

    convert_namespace_to_omegaconf.truneg_quiet = True
    rebind_conversion(original, convert_namespace_to_omegaconf)
