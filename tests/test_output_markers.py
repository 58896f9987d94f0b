"""Output locks and markers that cannot be read or removed: one error naming the file."""

import pytest
from failures import immutable

from truneg_fairseq.errors import OutputDirError
from truneg_fairseq.outputs import MARKER, atomic_dir, output_lock, staged_entries


@pytest.mark.parametrize("kind", ["output_lock", "atomic_dir"])
def test_a_lock_file_that_cannot_be_removed_is_one_error_naming_it(tmp_path, kind):
    lock = tmp_path / ".out.lock"
    lock.write_text("999999999")  # the lock of a run that ended, left read-only (immutable)
    with immutable(lock):
        with pytest.raises(OutputDirError, match=r"\.out\.lock.*remove .* by hand"):
            ctx = output_lock(tmp_path / "out") if kind == "output_lock" else None
            with ctx or atomic_dir(tmp_path / "out", "a command"):
                pass
    assert not (tmp_path / "out").exists()


def test_a_marker_nested_past_the_json_parser_is_one_error(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / MARKER).write_text("[" * 100_000 + "]" * 100_000)
    for ctx in (atomic_dir(out, "a command"), staged_entries(out, "a command", ["a.txt"])):
        with pytest.raises(OutputDirError, match="not readable JSON .nested too deeply"):
            with ctx as stage:
                (stage / "a.txt").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == [MARKER]


@pytest.mark.parametrize("marker", ["[1, 2]", '"text"', "null", '{"files": 3}'])
def test_a_staged_marker_that_is_no_object_stops_the_recovery_with_one_error(tmp_path, marker):
    out = tmp_path / "out"
    with atomic_dir(out, "a command") as stage:
        (stage / "a.txt").write_text("old")
    # what a run killed during its swap leaves, but with a marker that is not ours
    (tmp_path / ".out.old-1").mkdir()
    (tmp_path / ".out.new-1").mkdir()
    (tmp_path / ".out.new-1" / MARKER).write_text(marker)
    with pytest.raises(OutputDirError, match=r"\.out\.new-1.*not a marker of this project"):
        with atomic_dir(out, "a command") as stage:
            (stage / "a.txt").write_text("new")
    assert (out / "a.txt").read_text() == "old"


# ---- synonym tables -----------------------------------------------------------------------
