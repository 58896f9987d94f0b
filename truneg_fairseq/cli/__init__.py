"""Every command line of the project, one module each (``main(argv=None) -> int``: argparse
there, the work in library functions), installed as the ``truneg-*`` console commands of
pyproject.toml and run from a checkout by the thin wrappers in ``scripts/``. What they share:
logging in fairseq's format, one-line errors, argument types, ``--dict`` and positional
checkpoints (``common.py``). Imports the leaf modules only."""
