"""Synonym-table files: a full disk while saving one, and meta records or arrays of wrong types
or ids, are each one error (and no file); a file that is no synonym table is said to be one,
without advice about pickles."""

import json

import numpy as np
import pytest
from failures import file_size_limit

from truneg_fairseq.errors import SynonymTableError


def _table(n_pairs=20000, n_symbols=50000):
    from truneg_fairseq.lexicon import SynonymTable

    rng = np.random.default_rng(0)
    pairs = np.unique(rng.integers(0, n_symbols, size=(n_pairs, 2)), axis=0)
    table = SynonymTable.empty(["w%d" % i for i in range(n_symbols)])
    table.pairs = pairs.astype(np.int64)
    return table


def test_a_full_disk_while_saving_a_synonym_table_is_one_error_and_no_file(tmp_path):
    path = tmp_path / "synonyms.npz"
    table = _table()
    with file_size_limit(16 * 1024):
        with pytest.raises(SynonymTableError, match=r"synonyms\.npz: writing failed .*free space"):
            table.save(path)
    assert list(tmp_path.iterdir()) == []
    table.save(path)  # and with space, the same call writes it
    assert len(type(table).load(path)) == len(table)


def _write_table(path, meta, **arrays):
    arrays.setdefault("pairs", np.zeros((1, 2), np.int64))
    arrays.setdefault("continuation_ids", np.zeros(0, np.int64))
    np.savez(path, meta=np.asarray(json.dumps(meta)), **arrays)


FP = "ab" * 32


@pytest.mark.parametrize(
    "meta, match",
    [
        ([1, 2], "meta record is a JSON list, not an object"),
        ({"format_version": 1, "num_symbols": "many", "fingerprint": FP}, "num_symbols is 'many'"),
        ({"format_version": 1, "num_symbols": 10.5, "fingerprint": FP}, "num_symbols is 10.5"),
        ({"format_version": 1, "num_symbols": 10, "fingerprint": 7}, "fingerprint is 7"),
        ({"format_version": "1", "num_symbols": 10, "fingerprint": FP}, "table format '1'"),
    ],
)
def test_a_synonym_table_meta_record_of_wrong_types_is_one_error(tmp_path, meta, match):
    from truneg_fairseq.lexicon import SynonymTable

    path = tmp_path / "t.npz"
    _write_table(path, meta)
    with pytest.raises(SynonymTableError, match=match):
        SynonymTable.load(path)


@pytest.mark.parametrize(
    "arrays, match",
    [
        ({"pairs": np.array([[0.5, 1.0]])}, "pairs array is float64"),
        ({"pairs": np.array([[0, 99]])}, "ids outside the dictionary's 10 entries"),
        ({"continuation_ids": np.array([-1])}, "continuation_ids hold ids outside"),
    ],
)
def test_synonym_table_arrays_of_wrong_types_or_ids_are_one_error(tmp_path, arrays, match):
    from truneg_fairseq.lexicon import SynonymTable

    path = tmp_path / "t.npz"
    _write_table(path, {"format_version": 1, "num_symbols": 10, "fingerprint": FP}, **arrays)
    with pytest.raises(SynonymTableError, match=match):
        SynonymTable.load(path)


def test_synonym_table_of_junk_gets_no_pickle_advice(tmp_path):
    import numpy as np

    from truneg_fairseq.lexicon.synonyms import SynonymTable, SynonymTableError

    junk = tmp_path / "table.npz"
    junk.write_text("primary main chief\n" * 20)
    objects = tmp_path / "objects.npz"
    np.savez(objects, pairs=np.array([{"a": 1}], dtype=object))
    for path, why in ((junk, "not an .npz archive"), (objects, "it holds pickled objects")):
        with pytest.raises(SynonymTableError) as e:
            SynonymTable.load(path)
        assert f"{path} is not a synonym table written by build_synonym_table.py ({why})" in str(
            e.value
        )
        assert "allow_pickle" not in str(e.value) and "pickle.load" not in str(e.value)
