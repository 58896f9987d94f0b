"""examples/squad/finetune.sh on a BERT imported with scripts/convert_hf.py: WordPiece (its
vocab.txt) rather than sentencepiece, and the model's 40 positions (no size flag: the arch and
sizes come from the checkpoint, the windows fit the positions)."""

import re

import pytest
import torch
from command_runs import run_recipe
from squad_fixtures import write_squad_dir


@pytest.mark.slow
def test_squad_recipe_on_an_imported_wordpiece_bert(tmp_path):
    from hf_fixtures import bert_config, wordpiece_vocab, write_vocab
    from transformers import BertForMaskedLM

    from truneg_fairseq.convert import hf as hf_convert

    vocab = wordpiece_vocab()
    torch.manual_seed(0)
    BertForMaskedLM(bert_config(len(vocab), max_position_embeddings=40)).save_pretrained(
        str(tmp_path / "hf")
    )
    write_vocab(tmp_path / "hf", vocab)
    imported = hf_convert.import_hf(tmp_path / "hf", tmp_path / "imported")
    sq = write_squad_dir(tmp_path / "squad", imported / "dict.txt", n_copies=1)
    r = run_recipe(
        "squad/finetune.sh",
        [
            "roberta_base",
            str(sq),
            str(imported / "vocab.txt"),
            str(imported / "model.pt"),
            "--cpu",
            "--log-interval",
            "1",
        ],
        tmp_path,
        SAVE_DIR=str(tmp_path / "ft"),
        UPDATES="2",
        WARMUP="1",
        BSZ="4",
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "finetune.sh: 2 updates (1 of warm-up), batches of 4 x 1" in r.stderr
    rates = re.findall(r"\| train_inner \| .*num_updates=(\d+), lr=([\d.e-]+)", r.stdout)
    assert [(int(n), float(lr)) for n, lr in rates] == [(1, 1.5e-5), (2, 0.0)]
    assert (tmp_path / "ft" / "predictions.json").is_file()
    assert '"exact_match"' in r.stdout and '"f1"' in r.stdout
    assert "positional argument" not in r.stderr  # the recipe calls squad_predict as documented
    cfg = torch.load(tmp_path / "ft" / "checkpoint_best.pt", map_location="cpu", weights_only=False)
    cfg = {k: v if isinstance(v, dict) or v is None else vars(v) for k, v in cfg["cfg"].items()}
    assert cfg["model"]["max_positions"] == 40 and cfg["task"]["squad_max_len"] == 40
    assert cfg["task"]["squad_tokenizer"] == "wordpiece"


@pytest.mark.parametrize("flag", ["--max-update", "--max-epoch=1", "--warmup-updates"])
def test_flags_that_part_the_schedule_from_the_run_are_refused(tmp_path, flag):
    """The run makes UPDATES updates and its schedule is theirs: a flag that would end it
    elsewhere or change the schedule is one error naming UPDATES and WARMUP, before any work."""
    for name in ("dict.txt", "train.json", "valid.json", "spm.model", "model.pt"):
        (tmp_path / name).write_text("")
    args = ["small", str(tmp_path), str(tmp_path / "spm.model"), str(tmp_path / "model.pt")]
    r = run_recipe("squad/finetune.sh", [*args, flag, "3"], tmp_path)
    assert r.returncode == 2
    assert f"error: {flag.split('=')[0]}: " in r.stderr and "UPDATES=N and WARMUP=N" in r.stderr
    r = run_recipe("squad/finetune.sh", args, tmp_path, UPDATES="10", WARMUP="10")
    assert r.returncode == 2 and "WARMUP=10: the warm-up must end before" in r.stderr
