"""Outputs keep the usual permissions: a directory written through ``atomic_dir`` and its files
get the modes the umask gives a plain ``mkdir`` and a plain write."""

import os
import stat


def test_atomic_dir_follows_umask(tmp_path):
    from truneg_fairseq.outputs import atomic_dir

    old = os.umask(0o022)
    try:
        with atomic_dir(tmp_path / "out", "a command") as work:
            (work / "f.txt").write_text("x")
        (tmp_path / "ref").mkdir()
    finally:
        os.umask(old)
    mode = stat.S_IMODE((tmp_path / "out").stat().st_mode)
    assert mode == 0o755 == stat.S_IMODE((tmp_path / "ref").stat().st_mode)
    assert stat.S_IMODE((tmp_path / "out" / "f.txt").stat().st_mode) == 0o644
