"""Where the checkout is: the repository root and the plugin's ``--user-dir``."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


USER_DIR = str(REPO / "truneg_fairseq")
