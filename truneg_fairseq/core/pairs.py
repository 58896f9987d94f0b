"""The key of a synonym pair: one int64 ``gold << KEY_SHIFT | pred``, sorted in a table's file and
searched on the device (:mod:`truneg_fairseq.core.lookup`). Standard library only, so the table
files and the commands that write them need no torch."""

KEY_SHIFT = 32  # unique for any vocabulary under 2**31 entries
