"""Values read from files are data of a known type and size before they reach a command line, a
constructor or an allocation: a checkpoint's model config (the schema of
truneg_fairseq/checkpoint_schema/model_values.py, bounded by the weights in the file), its tokenizer config
(local paths only), a synonym table's arrays (bounded by the dictionary before they are
decompressed), a data-bin's index (its sizes against the .bin file) and archives given to the hub
(no member outside the target)."""

import os
import subprocess
import time
from pathlib import Path

import pytest
import torch
from fairseq_runs import TINY_ROBERTA, fairseq_train
from repo_paths import REPO


def _crafted(plain: Path, out: Path, **fields) -> Path:
    """A copy of a real checkpoint with model config fields set; still plain data."""
    state = torch.load(plain, map_location="cpu", weights_only=True)
    model = state["cfg"]["model"]
    for key, value in fields.items():
        if isinstance(model, dict):
            model[key] = value
        else:
            setattr(model, key, value)
    torch.save(state, out)
    torch.load(out, weights_only=True)
    return out


def _size_flags_in_bash(checkpoint: Path) -> subprocess.CompletedProcess:
    """The recipes' own ``checkpoint_size_flags`` (examples/paths.sh), each flag on a line."""
    script = (
        f'REPO="{REPO}"; source "{REPO}/examples/paths.sh"; checkpoint_size_flags "$1"; '
        'printf "flag:%s\\n" "${SIZE_FLAGS[@]}"'
    )
    env = dict(os.environ, PYTHON=os.environ.get("PYTHON", __import__("sys").executable))
    return subprocess.run(
        ["bash", "-c", script, "bash", str(checkpoint)], capture_output=True, text=True, env=env
    )


@pytest.mark.parametrize(
    "value", ["--user-dir=/tmp/x", "gelu\n--user-dir=/tmp/x"], ids=["flag", "newline"]
)
def test_checkpoint_size_flags_refuses_a_flag_hidden_in_a_value(plain_checkpoint, tmp_path, value):
    evil = _crafted(plain_checkpoint, tmp_path / "evil.pt", activation_fn=value)
    proc = _size_flags_in_bash(evil)
    assert proc.returncode != 0
    assert "flag:" not in proc.stdout  # no flag line reached the recipe
    assert str(evil) in proc.stderr and "activation_fn" in proc.stderr
    assert "user-dir" in proc.stderr and "Traceback" not in proc.stderr


def test_size_flags_of_a_plain_checkpoint(plain_checkpoint):
    """What the recipes get from a checkpoint saved by fairseq-train (the recipe tests run the
    bash function on such checkpoints end to end)."""
    from truneg_fairseq.pipelines.glue_run_config import size_flags

    flags = size_flags(str(plain_checkpoint))
    assert flags[:2] == ["--arch", "roberta_base"]
    assert flags[flags.index("--encoder-layers") + 1] == "2"
    assert flags[flags.index("--activation-fn") + 1] == "gelu"


@pytest.mark.parametrize(
    "field,value,said",
    [
        ("encoder_layers", 10**6, "outside 1..1024"),
        ("encoder_layers", 5, "more than the 2 layer(s)"),
        ("encoder_ffn_embed_dim", 10**9, "outside 1..262144"),
        ("encoder_ffn_embed_dim", 200_000, "larger than any dimension"),
        ("encoder_attention_heads", "2", "not a whole number"),
        ("dropout", float("nan"), "not a finite number"),
        ("encoder_normalize_before", "yes", "not true or false"),
        ("pooler_activation_fn", "os.system", "which fairseq does not know"),
    ],
)
def test_every_loader_refuses_a_value_outside_its_field(
    plain_checkpoint, data_bin, tmp_path, field, value, said
):
    from truneg_fairseq.checkpoints import CheckpointError, load_for_inference
    from truneg_fairseq.pipelines.glue_run_config import GlueFinetuneError, size_flags

    evil = _crafted(plain_checkpoint, tmp_path / "evil.pt", **{field: value})
    start = time.time()
    with pytest.raises(CheckpointError) as e:
        load_for_inference(evil, str(data_bin))
    assert str(evil) in str(e.value) and field in str(e.value) and said in str(e.value)
    with pytest.raises(GlueFinetuneError, match=field):
        size_flags(str(evil))
    assert time.time() - start < 20


def test_every_field_of_the_plugins_families_has_a_schema_entry():
    """Derived from fairseq's registries: a field added to a model must say its type and range."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    from truneg_fairseq.checkpoint_schema.model_values import SCHEMA
    from truneg_fairseq.compat import loadable_architectures
    from truneg_fairseq.pipelines.glue_run_config import model_fields

    missing = {
        f"{arch}.{f}"
        for arch in loadable_architectures()
        if arch in ARCH_MODEL_REGISTRY
        for f in model_fields(arch)
        if f not in SCHEMA
    }
    assert not missing, sorted(missing)


def _tar(path: Path, members) -> Path:
    """A .tar.gz holding ``members`` (name -> bytes, or (name, bytes) pairs: a name may come
    twice) under exactly those names; a name ending in ``/`` is a directory."""
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items() if isinstance(members, dict) else members:
            info = tarfile.TarInfo(name.rstrip("/"))
            if name.endswith("/"):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
                continue
            if data.startswith(b"LINK:"):  # a symbolic link to the rest
                info.type, info.linkname = tarfile.SYMTYPE, data[5:].decode()
                tar.addfile(info)
                continue
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize(
    "bad",
    ["../../escaped.py", "model/../../escaped.py", "ABS", "LINK"],
    ids=["dotdot", "inner-dotdot", "absolute", "symlink"],
)
def test_hub_archives_with_members_outside_the_target_are_refused(tmp_path, bad):
    from fairseq import file_utils
    from fairseq.models import MODEL_REGISTRY

    import truneg_fairseq  # noqa: F401  (installs the check)
    from truneg_fairseq.compat import UnsafeArchiveError

    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    target = tmp_path / "escaped.py" if bad != "ABS" else tmp_path / "abs_escaped.py"
    name = {"ABS": str(target), "LINK": "model/link.py"}.get(bad, bad)
    payload = f"LINK:{target}".encode() if bad == "LINK" else b"import os\n"
    archive = _tar(work / "model.tar.gz", {"model/model.pt": b"x", name: payload})
    before = archive.read_bytes()
    with pytest.raises(UnsafeArchiveError) as e:
        file_utils.load_archive_file(str(archive))
    assert str(archive) in str(e.value) and name in str(e.value)
    with pytest.raises(UnsafeArchiveError):  # a model class the plugin registers, fairseq's hub
        MODEL_REGISTRY["bert"].from_pretrained(str(archive))
    assert not target.exists() and not (work / "escaped.py").exists()
    assert archive.read_bytes() == before  # the user's archive stays


def test_a_safe_hub_archive_is_extracted_and_kept(tmp_path):
    from fairseq import file_utils

    import truneg_fairseq  # noqa: F401

    archive = _tar(tmp_path / "m.tar.gz", {"model/dict.txt": b"a 1\n", "model/model.pt": b"x"})
    out = Path(file_utils.load_archive_file(str(archive)))
    assert (out / "dict.txt").read_bytes() == b"a 1\n" and archive.is_file()
    assert not str(out).startswith(str(tmp_path))  # extracted elsewhere: nothing beside it changed


def _sparse_tar(path: Path, size: int) -> Path:
    """A .tar.gz of a few hundred bytes whose ``model/model.pt`` is a sparse member declaring
    ``size`` bytes (GNU sparse 0.1 in pax headers, which tarfile reads and would write out)."""
    import io
    import tarfile

    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("model/dict.txt")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"a 1\n"))
        info = tarfile.TarInfo("model/model.pt")
        info.size = 512
        info.pax_headers = {
            "GNU.sparse.major": "0",
            "GNU.sparse.minor": "1",
            "GNU.sparse.name": "model/model.pt",
            "GNU.sparse.size": str(size),
            "GNU.sparse.map": "0,512",
        }
        tar.addfile(info, io.BytesIO(bytes(512)))
    return path


@pytest.fixture
def hub_tmp(tmp_path, monkeypatch):
    """The directory the hub's temporary extraction directories are made in, for this test."""
    import tempfile

    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def test_an_archive_declaring_a_huge_member_is_refused_before_writing_it(tmp_path, hub_tmp):
    from fairseq import file_utils

    import truneg_fairseq  # noqa: F401
    from truneg_fairseq.compat import UnsafeArchiveError

    archive = _sparse_tar(tmp_path / "m.tar.gz", 1 << 40)
    assert archive.stat().st_size < 1000
    with pytest.raises(
        UnsafeArchiveError,
        match=r"m\.tar\.gz: its members declare \d+ bytes.*"
        r"'model/model\.pt'.*TRUNEG_HUB_ARCHIVE_MAX_RATIO",
    ):
        file_utils.load_archive_file(str(archive))
    assert list(hub_tmp.iterdir()) == []  # nothing written, the temporary directory is gone


def test_an_archive_expanding_past_its_ratio_or_the_byte_limit_is_refused(
    tmp_path, hub_tmp, monkeypatch
):
    """A plain gzip bomb (80 MiB of zeros in ~80 KB) is refused by the ratio; a limit set in the
    environment refuses a normal archive larger than it, and a bad value is named."""
    from fairseq import file_utils

    import truneg_fairseq  # noqa: F401
    from truneg_fairseq.compat import UnsafeArchiveError

    bomb = _tar(tmp_path / "bomb.tar.gz", {"model/model.pt": bytes(80 << 20)})
    assert bomb.stat().st_size < (1 << 20)
    with pytest.raises(UnsafeArchiveError, match="TRUNEG_HUB_ARCHIVE_MAX_RATIO"):
        file_utils.load_archive_file(str(bomb))
    small = _tar(tmp_path / "s.tar.gz", {"model/dict.txt": b"a 1\n", "model/model.pt": b"x" * 100})
    monkeypatch.setenv("TRUNEG_HUB_ARCHIVE_MAX_BYTES", "50")
    with pytest.raises(
        UnsafeArchiveError, match=r"more than 50 bytes \(TRUNEG_HUB_ARCHIVE_MAX_BYTES"
    ):
        file_utils.load_archive_file(str(small))
    monkeypatch.setenv("TRUNEG_HUB_ARCHIVE_MAX_BYTES", "lots")
    with pytest.raises(UnsafeArchiveError, match="TRUNEG_HUB_ARCHIVE_MAX_BYTES='lots' is not"):
        file_utils.load_archive_file(str(small))
    assert list(hub_tmp.iterdir()) == []
    monkeypatch.setenv("TRUNEG_HUB_ARCHIVE_MAX_BYTES", "104")
    out = Path(file_utils.load_archive_file(str(small)))
    assert (out / "model.pt").read_bytes() == b"x" * 100


def test_an_archive_with_too_many_members_is_refused(tmp_path, hub_tmp, monkeypatch):
    from fairseq import file_utils

    import truneg_fairseq  # noqa: F401
    from truneg_fairseq.compat import UnsafeArchiveError
    from truneg_fairseq.compat.hub_archives import DEFAULT_MAX_MEMBERS

    many = {f"model/f{i}.txt": b"" for i in range(DEFAULT_MAX_MEMBERS + 1)}
    with pytest.raises(UnsafeArchiveError, match=f"more than {DEFAULT_MAX_MEMBERS} members"):
        file_utils.load_archive_file(str(_tar(tmp_path / "many.tar.gz", many)))
    few = _tar(tmp_path / "few.tar.gz", {f"model/f{i}.txt": b"" for i in range(6)})
    monkeypatch.setenv("TRUNEG_HUB_ARCHIVE_MAX_MEMBERS", "5")
    with pytest.raises(UnsafeArchiveError, match="TRUNEG_HUB_ARCHIVE_MAX_MEMBERS"):
        file_utils.load_archive_file(str(few))
    assert list(hub_tmp.iterdir()) == []
    monkeypatch.setenv("TRUNEG_HUB_ARCHIVE_MAX_MEMBERS", "6")
    out = Path(file_utils.load_archive_file(str(few)))
    assert len([p for p in out.rglob("*") if p.is_file()]) == 6


@pytest.mark.parametrize("case", ["under-a-file", "file-and-directory", "twice", "truncated"])
def test_an_archive_that_cannot_be_extracted_is_one_error_and_leaves_nothing(
    tmp_path, hub_tmp, case
):
    """Members that contradict each other (``model.pt`` then ``model.pt/x``; a name that is a
    file and a directory; a file named twice) are refused before anything is written; a
    truncated archive fails while it is written: each is one error naming the archive, and the
    temporary directory is gone."""
    from fairseq import file_utils

    import truneg_fairseq  # noqa: F401
    from truneg_fairseq.compat import ArchiveError

    members = {
        "under-a-file": [("model/model.pt", b"x" * 1000), ("model/model.pt/x", b"y")],
        "file-and-directory": [("model/d", b"x"), ("model/d/", b"")],
        "twice": [("model/model.pt", b"x"), ("model/model.pt", b"y")],
        "truncated": [("model/dict.txt", b"a 1\n"), ("model/model.pt", os.urandom(200_000))],
    }[case]
    archive = _tar(tmp_path / "m.tar.gz", members)
    if case == "truncated":
        archive.write_bytes(archive.read_bytes()[:150_000])
    with pytest.raises(ArchiveError) as e:
        file_utils.load_archive_file(str(archive))
    said = str(e.value)
    assert said.startswith(str(archive)) and "Traceback" not in said
    assert ("truncated or damaged" if case == "truncated" else "nothing was extracted") in said
    assert list(hub_tmp.iterdir()) == []
    assert archive.is_file()  # the user's archive stays


def test_loading_an_archive_again_reuses_its_copy_and_exit_removes_it(tmp_path):
    """Each load of the same archive in a process gets the one copy extracted the first time;
    the process leaves nothing in the temporary directory when it exits. A changed archive is
    extracted anew."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    archive = _tar(tmp_path / "m.tar.gz", {"model/dict.txt": b"a 1\n", "model/model.pt": b"x"})
    code = (
        "import os, sys, time\n"
        "import truneg_fairseq\n"
        "from fairseq import file_utils\n"
        "a = file_utils.load_archive_file(sys.argv[1])\n"
        "b = file_utils.load_archive_file(sys.argv[1])\n"
        "assert a == b and open(os.path.join(a, 'dict.txt')).read() == 'a 1\\n'\n"
        "st = os.stat(sys.argv[1])\n"
        "os.utime(sys.argv[1], ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))\n"
        "c = file_utils.load_archive_file(sys.argv[1])\n"
        "assert c != a\n"
        "print(len([d for d in os.listdir(os.environ['TMPDIR']) if d.startswith('truneg-hub-')]))\n"
    )
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [__import__("sys").executable, "-c", code, str(archive)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "2"  # one copy each of two versions
    assert not [d for d in tmp.iterdir() if d.name.startswith("truneg-hub-")]


@pytest.mark.parametrize(
    "bpe",
    [
        {"_name": "sentencepiece", "sentencepiece_model": "https://example.com/spm.model"},
        {"_name": "gpt2", "gpt2_encoder_json": "s3://bucket/encoder.json"},
        {"_name": "wordpiece", "wordpiece_vocab": "hf://org/vocab.txt"},
    ],
)
def test_hub_refuses_a_tokenizer_config_naming_a_url(plain_checkpoint, data_bin, tmp_path, bpe):
    from truneg_fairseq.checkpoints import CheckpointError
    from truneg_fairseq.models.hub import from_pretrained

    state = torch.load(plain_checkpoint, map_location="cpu", weights_only=True)
    state["cfg"]["bpe"] = dict(bpe)
    (tmp_path / "ck").mkdir()
    torch.save(state, tmp_path / "ck" / "model.pt")
    field = next(k for k in bpe if k != "_name")
    with pytest.raises(CheckpointError) as e:
        from_pretrained(tmp_path / "ck", data_name_or_path=str(data_bin))
    assert str(tmp_path / "ck" / "model.pt") in str(e.value) and f"bpe.{field}" in str(e.value)
    assert "URL" in str(e.value)


def _zeros_table(real: Path, out: Path, rows: int) -> Path:
    """``real`` (a table of the session dictionary) with its pairs replaced by ``rows`` x 2 zeros,
    compressed: a small file that would decompress to ``rows * 16`` bytes."""
    import zipfile

    import numpy as np
    from numpy.lib import format as npy

    with zipfile.ZipFile(real) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for name in src.namelist():
            if name != "pairs.npy":
                dst.writestr(name, src.read(name))
        with dst.open("pairs.npy", "w", force_zip64=True) as f:
            npy.write_array_header_1_0(
                f, {"descr": "<i8", "fortran_order": False, "shape": (rows, 2)}
            )
            chunk = np.zeros((1 << 20, 2), dtype="<i8").tobytes()
            for _ in range(rows >> 20):
                f.write(chunk)
    return out


def test_a_synonym_table_is_bounded_before_it_is_decompressed(synonym_table, data_bin, tmp_path):
    import resource

    from truneg_fairseq.errors import SynonymTableError
    from truneg_fairseq.lexicon.synonyms import SynonymTable

    n = sum(1 for _ in open(data_bin / "dict.txt")) + 4
    bomb = _zeros_table(synonym_table, tmp_path / "bomb.npz", rows=1 << 24)  # 256 MiB of zeros
    assert bomb.stat().st_size < (2 << 20)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.time()
    for vocab in (n, None):
        with pytest.raises(SynonymTableError, match=str(bomb)):
            SynonymTable.load(bomb, vocab)
    assert time.time() - start < 5
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < (200 << 10)  # KiB
    assert len(SynonymTable.load(synonym_table, n)) > 0
    # more pairs than a table of its dictionary can hold, compressing as real ids do
    import numpy as np

    with np.load(synonym_table) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["pairs"] = np.random.default_rng(0).integers(0, 50, size=(n * n, 2))
    many = tmp_path / "many.npz"
    np.savez_compressed(many, **arrays)
    with pytest.raises(SynonymTableError, match=f"{many}: its pairs array has {n * n} rows"):
        SynonymTable.load(many, n)
    with pytest.raises(SynonymTableError, match="more than the 3 entries"):
        SynonymTable.load(synonym_table, 3)


def _copy_split(data_bin: Path, out: Path) -> Path:
    import shutil

    out.mkdir()
    for name in ("dict.txt", "valid.bin", "valid.idx"):
        shutil.copy(data_bin / name, out / name)
    return out


@pytest.mark.parametrize("case", ["huge", "negative", "short_bin", "pointer"])
def test_a_data_bin_index_that_does_not_fit_its_bin_is_one_error(data_bin, tmp_path, case):
    import numpy as np
    from fairseq.data import data_utils
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    import truneg_fairseq  # noqa: F401  (installs the check)
    from truneg_fairseq.compat import DataIndexError

    d = _copy_split(data_bin, tmp_path / "bin")
    idx = d / "valid.idx"
    index = MMapIndexedDataset.Index(str(idx))
    offset = 9 + 8 + 1 + 8
    n = len(index)
    del index
    raw = bytearray(idx.read_bytes())
    sizes = np.frombuffer(raw, dtype=np.int32, count=n, offset=offset)
    pointers = np.frombuffer(raw, dtype=np.int64, count=n, offset=offset + 4 * n)
    if case == "huge":
        sizes[0] = 2**31 - 1
    elif case == "negative":
        sizes[1] = -5
    elif case == "pointer":
        pointers[2] += 2
    idx.write_bytes(bytes(raw))
    if case == "short_bin":
        (d / "valid.bin").write_bytes((d / "valid.bin").read_bytes()[:-2])
    start = time.time()
    with pytest.raises(DataIndexError) as e:
        data_utils.load_indexed_dataset(str(d / "valid"), None)
    assert time.time() - start < 5
    assert str(idx) in str(e.value) and "binarize the data again" in str(e.value)
    assert len(data_utils.load_indexed_dataset(str(data_bin / "valid"), None)) == n  # whole: fine


def test_a_tokenizer_record_naming_a_url_is_refused(tmp_path):
    import json

    from truneg_fairseq.text import TokenizerError, spec_from_record
    from truneg_fairseq.text.spec import RECORD_NAME, RECORD_VERSION

    key = "spm_model"
    record = {
        "format_version": RECORD_VERSION,
        "tokenizer": "sentencepiece",
        "files": {key: {"path": "https://example.com/spm.model", "sha256": "0" * 64}},
    }
    (tmp_path / RECORD_NAME).write_text(json.dumps(record))
    with pytest.raises(TokenizerError) as e:
        spec_from_record(tmp_path)
    assert str(tmp_path / RECORD_NAME) in str(e.value) and f"files.{key}.path" in str(e.value)


def test_restore_file_with_a_value_outside_its_field_is_one_error(
    plain_checkpoint, data_bin, tmp_path
):
    evil = _crafted(plain_checkpoint, tmp_path / "evil.pt", activation_fn="--user-dir=/tmp/x")
    proc = fairseq_train(
        data_bin,
        tmp_path / "ft",
        [
            *TINY_ROBERTA,
            "--criterion",
            "masked_lm",
            "--max-update",
            "1",
            "--restore-file",
            str(evil),
        ],
        check=False,
    )
    assert proc.returncode != 0
    assert str(evil) in proc.stderr and "activation_fn" in proc.stderr
    assert not (tmp_path / "ft" / "checkpoint_last.pt").exists()


def test_a_sparse_bin_claiming_a_huge_sentence_is_one_error_in_fairseq_train(data_bin, tmp_path):
    """A 1 GiB ``valid.bin`` with no data on disk (a sparse file) and an index of one 2**29-token
    sentence: the sizes add up to the file's size, but the sentence is not stored; fairseq-train
    ends at once in one line naming the file and the sentence."""
    import shutil

    import numpy as np
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    d = tmp_path / "bin"
    shutil.copytree(data_bin, d)
    dtype = MMapIndexedDataset.Index(str(d / "valid.idx")).dtype
    n = 2**29
    with open(d / "valid.bin", "wb") as f:
        f.truncate(n * np.dtype(dtype).itemsize)
    with MMapIndexedDataset.Index.writer(str(d / "valid.idx"), dtype) as w:
        w.write([n])
    start = time.time()
    proc = fairseq_train(
        d, tmp_path / "run", [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "1"],
        check=False,
    )  # fmt: skip
    assert time.time() - start < 30
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert f"{d / 'valid.idx'} does not describe" in line, line
    assert "sentence 0 of 536,870,912 tokens" in line and "sparse" in line, line


def test_a_sentence_longer_than_the_positions_is_one_line_in_fairseq_train(data_bin, tmp_path):
    """--sample-break-mode eos keeps each sentence whole: one longer than --tokens-per-sample is
    one line naming the split and the sample (fairseq's batching raised a bare Exception after
    the splits were built); --sample-break-mode none cuts it into blocks and trains."""
    args = [*TINY_ROBERTA, "--criterion", "masked_lm", "--max-update", "1"]
    args += ["--tokens-per-sample", "13"]  # sentences of 8 to 14 ids, <s> added: some longer
    proc = fairseq_train(
        data_bin, tmp_path / "eos", [*args, "--sample-break-mode", "eos"], check=False
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert f"{data_bin / 'valid'}.bin/.idx: sample " in line, line
    assert "more than the 13 positions" in line and "--sample-break-mode none" in line, line
    fairseq_train(data_bin, tmp_path / "none", [*args, "--sample-break-mode", "none"])


def _with_token(data_bin, out, token: int):
    """A copy of ``data_bin`` whose valid.bin holds ``token`` as the first token of its third
    sentence."""
    import shutil

    import numpy as np
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    shutil.copytree(data_bin, out)
    index = MMapIndexedDataset.Index(str(out / "valid.idx"))
    dtype, start = np.dtype(index.dtype), int(index._pointers[2])
    del index
    raw = bytearray((out / "valid.bin").read_bytes())
    np.frombuffer(raw, dtype=dtype)[start // dtype.itemsize] = token
    (out / "valid.bin").write_bytes(bytes(raw))
    return out


def test_a_token_id_outside_the_dictionary_is_one_error_naming_the_file(
    plain_checkpoint, data_bin, tmp_path
):
    """valid.bin holding id 60000 while dict.txt has a few hundred entries: reading the split
    with its dictionary refuses that sentence, and fairseq-validate ends in one line naming the
    file and the sentence (fairseq's own end is an IndexError in the model's embedding)."""
    from fairseq.data import Dictionary, data_utils
    from fairseq_runs import fairseq_validate

    import truneg_fairseq  # noqa: F401  (installs the check)
    from truneg_fairseq.compat import DataIndexError

    d = _with_token(data_bin, tmp_path / "bin", 60000)
    dictionary = Dictionary.load(str(d / "dict.txt"))
    assert len(dictionary) < 60000
    split = data_utils.load_indexed_dataset(str(d / "valid"), dictionary)
    assert split[1].max() < len(dictionary)
    with pytest.raises(DataIndexError) as e:
        split[2]
    assert f"{d / 'valid'}.bin" in str(e.value) and "sentence 2" in str(e.value)
    assert "token id 60000" in str(e.value) and "binarize it again" in str(e.value)
    assert data_utils.load_indexed_dataset(str(d / "valid"), None)[2].max() == 60000  # unchecked

    proc = fairseq_validate(d, plain_checkpoint, ["--task", "masked_lm"])
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "IndexError" not in proc.stderr, proc.stderr[-3000:]
    assert "valid.bin: sentence 2 holds token id 60000" in proc.stderr, proc.stderr[-3000:]


def test_a_token_id_outside_the_dictionary_stops_batch_masked_lm_in_one_line(data_bin, tmp_path):
    """batch_masked_lm reads blocks straight from the token stream (no per-sentence read): the
    block holding the id is refused there, and fairseq-train's validation ends in one line."""
    from failures import one_fairseq_error

    d = _with_token(data_bin, tmp_path / "bin", 60000)
    proc = fairseq_train(
        d,
        tmp_path / "run",
        [
            *TINY_ROBERTA,
            "--task",
            "batch_masked_lm",
            "--criterion",
            "masked_lm",
            "--max-update",
            "1",
        ],
        check=False,
    )
    line = one_fairseq_error(proc, f"{d / 'valid'}.bin: block ", "holds token id 60000")
    assert "IndexError" not in proc.stderr, line
