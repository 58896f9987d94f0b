"""The converter's names where scripts and tests import them from."""

from truneg_fairseq.convert.export import *  # noqa: F401,F403
from truneg_fairseq.convert.export import _save_checkpoint  # noqa: F401
