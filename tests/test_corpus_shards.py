"""truneg-prepare-corpus --shards N: the training split in N shards that joined in order are the
unsharded split byte for byte, each with the dictionary, the validation split once; fairseq-train
given the logged DATA argument trains each epoch on the next shard."""

import re
from pathlib import Path

import numpy as np
import pytest
from command_runs import run_recipe
from corpus_fixtures import tiny_corpus_lines
from fairseq_runs import TINY_TN_ROBERTA, fairseq_train

from truneg_fairseq.errors import CorpusError
from truneg_fairseq.pipelines.corpus import CorpusConfig, command_line, prepare_corpus
from truneg_fairseq.pipelines.corpus_shards import data_arg
from truneg_fairseq.text import TokenizerSpec


def _prepare(tmp_path, corpus_dir, name, caplog, **kw):
    src = tmp_path / "corpus.txt"
    if not src.exists():
        src.write_text("\n".join(tiny_corpus_lines(3000, 5)) + "\n")
    cfg = CorpusConfig(
        output_dir=str(tmp_path / name),
        inputs=[str(src)],
        tokenizer=TokenizerSpec("sentencepiece", spm_model=str(corpus_dir / "spm.model")),
        **kw,
    )
    with caplog.at_level("INFO"):
        return prepare_corpus(cfg), cfg


def test_shards_join_into_the_unsharded_split_and_train_one_an_epoch(tmp_path, corpus_dir, caplog):
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    whole, _ = _prepare(tmp_path, corpus_dir, "whole", caplog)
    sharded, cfg = _prepare(tmp_path, corpus_dir, "sharded", caplog, shards=3)
    assert "--shards" in command_line(cfg) and command_line(cfg)[-1] == "3"
    dirs = [sharded, sharded / "shard1", sharded / "shard2"]
    assert f"give fairseq-train {data_arg(sharded, 3)}" in caplog.text
    assert data_arg(sharded, 3) == ":".join(map(str, dirs))
    joined = b"".join((d / "train.bin").read_bytes() for d in dirs)
    assert joined == (whole / "train.bin").read_bytes()

    def sizes_of(prefix):  # a copy, taken while the file is mapped
        data = MMapIndexedDataset(str(prefix))
        return np.array(data.sizes)

    sizes = [sizes_of(d / "train") for d in dirs]
    assert all(len(s) > 0 for s in sizes)  # three shards of lines, none empty
    assert np.array_equal(np.concatenate(sizes), sizes_of(whole / "train"))
    for d in dirs[1:]:
        assert (d / "dict.txt").read_bytes() == (sharded / "dict.txt").read_bytes()
        assert not (d / "valid.bin").exists()
    assert (sharded / "valid.bin").read_bytes() == (whole / "valid.bin").read_bytes()
    # one shard an epoch: epoch e trains on shard (e - 1) % 3
    args = [*TINY_TN_ROBERTA, "--task", "batch_masked_lm", "--criterion", "mlm_plain"]
    args += ["--max-epoch", "3", "--disable-validation", "--batch-size", "32"]
    out = fairseq_train(Path(data_arg(sharded, 3)), tmp_path / "ckpt", args)
    loaded = re.findall(r"loaded \d+ blocks from: (\S+)/train\n", out.stdout)
    assert loaded[:3] == [str(d) for d in dirs], loaded
    # the recipe given the data-bin finds its shards and gives fairseq-train all of them
    r = run_recipe(
        "mlm/pretrain.sh",
        [str(sharded), "masked_lm", "--cpu", "--log-interval", "1"],
        tmp_path,
        RESTORE=str(tmp_path / "ckpt" / "checkpoint_last.pt"),
        SAVE_DIR=str(tmp_path / "recipe"),
        MAX_UPDATE="1",
        MAX_SENTENCES="4",
        UPDATE_FREQ="1",
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert f"{sharded} holds the training split in 3 shards" in r.stderr
    assert f"'data': '{data_arg(sharded, 3)}'" in r.stdout


def test_more_shards_than_lines_or_with_fairseq_preprocess_is_one_error(
    tmp_path, corpus_dir, caplog
):
    with pytest.raises(CorpusError, match="--shards 2: give 1 or more, with --binarizer fast"):
        _prepare(tmp_path, corpus_dir, "fp", caplog, shards=2, binarizer="fairseq-preprocess")
    with pytest.raises(CorpusError, match="--shards 100000: the train split has too few lines"):
        _prepare(tmp_path, corpus_dir, "many", caplog, shards=100000)
    assert not (tmp_path / "many" / "data-bin").exists()
