"""What the command lines in ``scripts/`` share: logging in fairseq's format, one-line errors,
argument types (``common.py``), and the full help of a ``fairseq-train`` command line
(``train_help.py``). Imports the leaf modules only."""
