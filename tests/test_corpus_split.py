"""The corpus split in bounded memory (truneg_fairseq.data.corpus_split): the same train.txt and
valid.txt, byte for byte, as the in-memory split it replaced (``dict.fromkeys`` then
``random.Random(seed).shuffle``) on the corpora of the other tests and on lines that try its
record format; the shuffle draws as ``random.shuffle`` does; the memory of reading and
splitting a text does not grow with its number of lines."""

import hashlib
import random
import tracemalloc
from pathlib import Path

import pytest
from corpus_fixtures import tiny_corpus_lines

from truneg_fairseq.data import corpus_steps
from truneg_fairseq.data.corpus_split import ExternalSplit, _IntFile, _shuffle_like_random
from truneg_fairseq.errors import CorpusError


def in_memory_split(lines, valid_fraction, seed):
    """The split as it was computed before it was a stream: (train bytes, valid bytes)."""
    uniq = list(dict.fromkeys(line for line in lines if line.strip()))
    random.Random(seed).shuffle(uniq)
    n_valid = max(1, int(len(uniq) * valid_fraction))
    return (
        "".join(x + "\n" for x in uniq[n_valid:]).encode(),
        "".join(x + "\n" for x in uniq[:n_valid]).encode(),
    )


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


# (lines, valid fraction, seed) -> (train lines, valid lines, sha256[:16] of train.txt and of
# valid.txt), as the in-memory split wrote them: the corpora the other tests prepare
EARLIER_SPLITS = {
    "tiny 8000": ((8000, 0), 0.02, 1, 4458, 90, "43905db1a17510c4", "41f1042aac5d1a4c"),
    "tiny 3000 seed 3": ((3000, 3), 0.02, 1, 1925, 39, "527ecd7cf064ce6d", "c4649cd86ca5a38e"),
    "tiny 2000": ((2000, 0), 0.02, 1, 1332, 27, "9bb378cbb30183c9", "31f4669686d852ae"),
    "tiny 1500 seed 4": ((1500, 4), 0.02, 1, 1045, 21, "5c2b1672c056c13b", "8a6bc6b2ec51b6ef"),
    "tiny 300": ((300, 0), 0.02, 1, 273, 5, "65d8793a82ef29b5", "1098243c9d1bd7cb"),
    "fixture corpus": ((1500, 0), 0.1, 1, 973, 108, "5cbc103e901e0650", "4feb8ed483193751"),
    "tiny 600 seed 8": ((600, 8), 0.05, 3, 487, 25, "4b79c0ac8d5d5562", "cbd45aa2fc0e35d3"),
}


@pytest.mark.parametrize("name", sorted(EARLIER_SPLITS))
def test_the_split_of_each_test_corpus_is_the_one_written_before(tmp_path, name):
    (n, seed_lines), fraction, seed, n_train, n_valid, train_sha, valid_sha = EARLIER_SPLITS[name]
    train, valid, got_train, got_valid = corpus_steps.write_split_corpus(
        tiny_corpus_lines(n, seed_lines), tmp_path, fraction, seed
    )
    assert (got_train, got_valid) == (n_train, n_valid)
    assert (_digest(train), _digest(valid)) == (train_sha, valid_sha)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.txt", "valid.txt"]


def test_the_wordnet_corpus_split_is_the_one_written_before(tmp_path, wn):
    """The demo's and the study's corpus: 155,878 glosses, from a generator."""
    train, valid, n_train, n_valid = corpus_steps.write_split_corpus(
        corpus_steps.wordnet_gloss_lines(wn), tmp_path, 0.02, 1
    )
    assert (n_train, n_valid) == (151950, 3101)
    assert (_digest(train), _digest(valid)) == ("3fc22fd501c6fd07", "e2a5a347774fb562")


def _split(tmp_path, lines, fraction, seed, **limits):
    with ExternalSplit(tmp_path / "work", **limits) as split:
        split.feed(line for line in lines if line.strip())
        train, valid, _, _ = split.finish(tmp_path / "out", fraction, seed)
        assert not any((tmp_path / "work").glob(".split-*/*"))  # each file gone once read
        return (train.read_bytes(), valid.read_bytes()), split.duplicates
    assert False


@pytest.mark.parametrize(
    "limits",
    [
        {},
        # partitions and ranges of a few hundred bytes, two files open at a time: every
        # partition is cut again (more than once), and so is every range of places
        {"part_bytes": 2000, "max_files": 2},
        {"part_bytes": 4000, "max_files": 3, "size_hint": 10**6},
    ],
    ids=["one partition", "cut again and again", "several partitions"],
)
def test_the_same_lines_as_in_memory_whatever_the_partitions(tmp_path, limits):
    """Lines that try the record format (backslashes, escapes, newlines and tabs inside a
    line, copies that differ only there) and plain duplicates: kept, dropped and ordered as
    the in-memory split did."""
    rng = random.Random(3)
    words = ["a", "b\\", "\\n", "c\nd", "\\\\", "\u00e9t\u00e9", "x\ty", "\n", "\\\n", "z"]
    lines = [" ".join(rng.choices(words, k=rng.randint(1, 3))) for _ in range(3000)]
    lines += tiny_corpus_lines(1500, seed=9)
    rng.shuffle(lines)
    for fraction, seed in ((0.02, 1), (0.3, 7)):
        got, dropped = _split(tmp_path / str(seed), lines, fraction, seed, **limits)
        assert got == in_memory_split(lines, fraction, seed)
        kept = [x for x in lines if x.strip()]
        assert dropped == len(kept) - len(set(kept))


def test_fewer_than_two_distinct_lines_is_an_error(tmp_path):
    with pytest.raises(CorpusError, match="has 1 non-empty distinct lines; need at least 2"):
        corpus_steps.write_split_corpus(["same line"] * 5 + ["  "], tmp_path / "out")
    assert not (tmp_path / "out" / "train.txt").exists()
    assert not list((tmp_path / "out").iterdir())  # no temporary file left


@pytest.mark.parametrize("n", [2, 3, 97, 8192, 8193, 3 * 8192 + 5])
def test_the_shuffle_draws_as_random_shuffle_does(tmp_path, n):
    """Through the chunk boundaries where the mapped pages are handed back."""
    for seed in (1, 12345):
        want = list(range(n))
        random.Random(seed).shuffle(want)
        order = _IntFile(tmp_path / f"order{seed}", n, identity=True)
        with ExternalSplit(tmp_path) as progress:
            _shuffle_like_random(order, random.Random(seed), progress)
        assert order.view.tolist() == want
        places = _IntFile(tmp_path / f"places{seed}", n)
        order.invert_into(places, progress)
        assert [want[p] for p in places.view.tolist()] == list(range(n))
        order.close(remove=True)
        places.close(remove=True)


def _text(path: Path, n_lines: int) -> Path:
    """``n_lines`` lines of a few words, one in five a copy of an earlier one."""
    rng = random.Random(n_lines)
    words = [w for line in tiny_corpus_lines(300) for w in line.split()]
    lines = []
    for i in range(n_lines):
        if i and rng.random() < 0.2:
            lines.append(lines[rng.randrange(len(lines))])
        else:
            lines.append(" ".join(rng.choices(words, k=rng.randint(40, 60))) + f" {i}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _peak_of_reading_and_splitting(text: Path, out: Path) -> int:
    tracemalloc.start()
    try:
        with ExternalSplit(
            out, size_hint=text.stat().st_size, part_bytes=64 << 10, max_files=8
        ) as split:
            split.feed(" ".join(r.split()) for r in corpus_steps.read_text_lines(text))
            split.finish(out, 0.02, 1)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_number_of_lines(tmp_path):
    """Reading a text and splitting it with 64 KiB partitions: the peak of Python's
    allocations is the same for 3x the lines (the reader's 1 MiB blocks and one partition; the
    in-memory split held every line, more than the text's size), and the split is still the
    in-memory one."""
    peaks = {}
    for n in (12_000, 36_000):
        text = _text(tmp_path / f"text{n}.txt", n)
        peaks[n] = _peak_of_reading_and_splitting(text, tmp_path / f"out{n}")
        want = in_memory_split(text.read_text(encoding="utf-8").splitlines(), 0.02, 1)
        got = tuple((tmp_path / f"out{n}" / f"{s}.txt").read_bytes() for s in ("train", "valid"))
        assert got == want
    size = (tmp_path / "text36000.txt").stat().st_size
    assert size > 8 << 20
    assert peaks[36_000] < 1.1 * peaks[12_000], peaks
    assert peaks[36_000] < 0.6 * size, (peaks, size)
