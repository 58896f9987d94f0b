"""truneg-hf-train and TrueNegativeTrainer on a tiny local BERT (2 x 32, dropout off): a run with
checkpoints, evaluation, tensorboard and the fairseq statistics in the log; a resume; two
processes under torchrun (gloo) equal to one process with gradient accumulation 2; and each bad
input refused with one message before training starts."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch
from corpus_fixtures import tiny_corpus_lines
from hf_fixtures import (
    bert_config,
    save_bert,
    saved_weights,
    tiny_bert_and_texts,
    wordpiece_vocab,
    write_vocab,
)
from repo_paths import REPO

from truneg_fairseq.cli import hf_train


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A BERT masked-LM directory (no dropout: runs compare weight for weight) and texts."""
    return tiny_bert_and_texts(tmp_path_factory.mktemp("hf_trainer"))


def base_args(tiny, out, *extra):
    return [
        str(tiny / "bert"), "--train", str(tiny / "texts"), "--output-dir", str(out),
        "--cpu", "--batch-size", "4", "--seq-len", "32", "--mask-prob", "0.3",
        "--lr", "1e-3", "--report-to", "none", *extra,
    ]  # fmt: skip


def step_of(ckpt):
    return json.loads((ckpt / "trainer_state.json").read_text())["global_step"]


@pytest.mark.slow
def test_run_checkpoints_statistics_and_resume(tiny, tmp_path, capsys):
    import shutil

    from transformers import BertForMaskedLM

    out = tmp_path / "run"
    args = base_args(tiny, out, "--valid", str(tiny / "valid.txt"), "--eval-steps", "3")
    args += ["--save-steps", "2", "--log-steps", "2", "--report-to", "tensorboard"]
    args += ["--max-steps", "6"]
    assert hf_train.main(args) == 0
    log = capsys.readouterr().out
    line = next(x for x in log.splitlines() if x.endswith("| num_updates 2"))
    values = line.split("INFO | truneg_fairseq.pipelines.hf_train | ")[1]
    for name in ("loss", "loss_bits", "mlm_loss_bits", "corrected_loss_bits", "ppl", "mlm_acc"):
        assert re.search(rf"(^|\| ){name} [\d.]+", values), name
    assert re.search(r"(^|\| )syn_acc [\d.]+", values)
    assert "pred_corr_ratio" in line and "iter_corr_ratio" in line and "content_pred" in line
    assert "iter_corr_ratio" in log and "eval_mlm_acc" in log and "eval_pred_corr_ratio" in log
    # evaluations at updates 3 and 6, the last one the final evaluation (printed once)
    evals = [x for x in log.splitlines() if "eval_mlm_acc" in x]
    assert len(evals) == 2 and evals[-1].endswith("num_updates 6"), evals
    assert "100 examples (one per non-empty line; 1 empty lines left out" in log
    assert (out / "synonyms.npz").is_file() and any((out / "runs").rglob("events.*"))
    assert [step_of(out / f"checkpoint-{n}") for n in (2, 4, 6)] == [2, 4, 6]
    BertForMaskedLM.from_pretrained(str(out / "checkpoint-2"))  # each checkpoint loads
    BertForMaskedLM.from_pretrained(str(out))  # and so does the final model
    straight = saved_weights(out)

    # interrupted after 4 updates, in the middle of saving checkpoint-6: the same command goes
    # on from checkpoint-4, the last complete one, and ends where the run without interruption
    # ended (optimizer, schedule, data position and masks as they were)
    record = json.loads((out / "checkpoint-6" / "truneg_run.json").read_text())
    shutil.rmtree(out / "checkpoint-6")
    (out / "model.safetensors").unlink()
    (out / "checkpoint-6").mkdir()  # as a save leaves it: the run's record first, no settings yet
    (out / "checkpoint-6" / "truneg_run.json").write_text(json.dumps({**record, "settings": None}))
    (out / "checkpoint-6" / "config.json").write_text("{")
    assert hf_train.main(args) == 0
    log = capsys.readouterr().out
    assert re.search(r"resuming from \S+checkpoint-4\b", log) and "incomplete checkpoint" in log
    assert "num_updates 6" in log and "num_updates 2 " not in log
    resumed = saved_weights(out)
    for k in straight:
        assert torch.allclose(resumed[k], straight[k], atol=1e-6, rtol=1e-5), k

    # the finished run run again: said so, nothing trained or written
    assert hf_train.main(args) == 0
    log = capsys.readouterr().out
    assert re.search(
        rf"{re.escape(str(out))} holds a finished run: \S+checkpoint-6 is at update 6", log
    )
    assert "num_updates" not in log and not (out / "checkpoint-7").exists()
    assert all(torch.equal(saved_weights(out)[k], resumed[k]) for k in resumed)


def nseq_per_update(log):
    """{update: nseq} from the log lines."""
    return {
        int(m.group(2)): float(m.group(1))
        for m in re.finditer(r"\bnseq ([\d.]+) \|.*num_updates (\d+)$", log, re.M)
    }


@pytest.mark.slow
def test_two_processes_equal_one_with_gradient_accumulation(tiny, tmp_path, capsys):
    """torchrun --nproc_per_node 2 (gloo) against one process with --grad-accum 2 over three
    epochs of 22 lines (not a multiple of batch 4 x 2 processes): the same updates, so the same
    statistics and final weights (the masks follow the example and the trainer's epoch, not the
    process; the rows that only fill a process's last batch count nowhere)."""
    text = tmp_path / "t.txt"
    text.write_text("\n".join(tiny_corpus_lines(22, seed=8)) + "\n")
    valid = tmp_path / "v.txt"  # 7 lines: 4 + 3 in two processes, none counted twice
    valid.write_text("\n".join(tiny_corpus_lines(7, seed=10)) + "\n")
    steps = ["--max-steps", "9", "--save-steps", "100", "--log-steps", "1", "--batch-size", "4"]
    steps += ["--train", str(text), "--valid", str(valid)]
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        PYTHONPATH=f"{REPO}{os.pathsep}" + os.environ.get("PYTHONPATH", ""),
    )
    two = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
         "--master_port", "29517", str(REPO / "scripts" / "hf_train.py"),
         *base_args(tiny, tmp_path / "two", *steps)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert two.returncode == 0, (two.stdout + two.stderr)[-3000:]
    assert "x 2 sequences" in two.stdout  # batch x accumulation x processes
    # the start-up lines once, from rank 0
    train_lines = [x for x in two.stdout.splitlines() if "| --train " in x and "examples (" in x]
    assert len(train_lines) == 1, two.stdout[-3000:]
    assert two.stdout.count("x 2 sequences") == 1
    assert hf_train.main(base_args(tiny, tmp_path / "one", *steps, "--grad-accum", "2")) == 0
    one = capsys.readouterr().out
    # 3 updates an epoch, of 8, 8 and 6 lines, in both
    expected = {u: (6.0 if u % 3 == 0 else 8.0) for u in range(1, 10)}
    assert nseq_per_update(two.stdout) == nseq_per_update(one) == expected
    evals = [
        re.search(r"eval_loss ([\d.]+) .*eval_nseq ([\d.]+)", log) for log in (two.stdout, one)
    ]
    assert evals[0].groups() == evals[1].groups() and float(evals[0].group(2)) == 7
    a, b = saved_weights(tmp_path / "two"), saved_weights(tmp_path / "one")
    start = saved_weights(tiny / "bert")
    assert a.keys() == b.keys()
    moved = max((a[k] - start[k]).abs().max().item() for k in a if k in start)
    assert moved > 1e-3  # it trained
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-5, rtol=1e-4), (k, (a[k] - b[k]).abs().max())


def api_run(tiny, out, max_steps, resume=None):
    """The API as documented (data without an "epoch" field) on 12 lines, batch 4: 3 updates
    an epoch, a checkpoint every 2; returns the trainer and the (epoch, index, labels) of each
    row collated."""
    from transformers import AutoTokenizer, BertForMaskedLM, TrainingArguments

    from truneg_fairseq.hf import (
        MaskedLMCollator,
        TrueNegativeMLM,
        TrueNegativeTrainer,
        tokenize_lines,
    )

    class Recording(MaskedLMCollator):
        seen = []

        def __call__(self, features):
            batch = super().__call__(features)
            for f, row in zip(features, batch["labels"]):
                self.seen.append((self.epoch, f["index"], tuple(row.tolist())))
            return batch

    tok = AutoTokenizer.from_pretrained(str(tiny / "bert"))
    ids = tokenize_lines(tok, tiny_corpus_lines(12, seed=9), 32)
    data = [{"input_ids": x, "index": i} for i, x in enumerate(ids)]
    model = TrueNegativeMLM(BertForMaskedLM.from_pretrained(str(tiny / "bert")), tok, "mlm")
    args = TrainingArguments(
        str(out), max_steps=max_steps, per_device_train_batch_size=4, learning_rate=1e-3,
        save_steps=2, logging_steps=100, report_to=[], use_cpu=True, seed=3,
    )  # fmt: skip
    collator = Recording(tok, mask_prob=0.3, seed=3)
    collator.seen = []
    trainer = TrueNegativeTrainer(
        model, args, data_collator=collator, train_dataset=data, processing_class=tok
    )
    trainer.train(resume_from_checkpoint=resume)
    return trainer, collator.seen


@pytest.mark.slow
def test_every_epoch_masks_anew_and_an_api_resume_is_exact(tiny, tmp_path):
    """The trainer gives the masks its integer epoch at every epoch's start: epoch 1 masks the
    lines anew; a run of the API resumed 2/3 into epoch 0 (Trainer's epoch 0.67) goes on with
    epoch 0's masks and ends with the weights of the run without interruption."""
    straight, seen = api_run(tiny, tmp_path / "a", 7)
    # (the loader collates one batch ahead: a batch more may follow)
    assert [e for e, _, _ in seen[:28]] == [0] * 12 + [1] * 12 + [2] * 4
    masks = [{i: labels for e, i, labels in seen if e == epoch} for epoch in (0, 1)]
    assert sorted(masks[0]) == sorted(masks[1]) == list(range(12))  # each line once an epoch
    assert sum(masks[0][i] != masks[1][i] for i in range(12)) >= 10  # new masks

    # workers that persist would keep the first epoch's collator: refused
    from transformers import TrainingArguments

    from truneg_fairseq.hf import TrueNegativeTrainer

    persistent = TrainingArguments(
        str(tmp_path / "p"), dataloader_num_workers=1, dataloader_persistent_workers=True,
        report_to=[], use_cpu=True,
    )  # fmt: skip
    with pytest.raises(ValueError, match="dataloader_persistent_workers"):
        TrueNegativeTrainer(straight.model, persistent)

    resumed, seen_r = api_run(tiny, tmp_path / "a", 7, resume=str(tmp_path / "a" / "checkpoint-2"))
    # updates 3 to 7 (5 batches of 4): the same lines, epochs and masks as without interruption
    tail = seen[8:28]
    assert any(seen_r[i : i + 20] == tail for i in range(len(seen_r))), seen_r
    a, b = straight.model.mlm.state_dict(), resumed.model.mlm.state_dict()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6, rtol=1e-5), (k, (a[k] - b[k]).abs().max())


def expect_error(capsys, argv, *needles):
    with pytest.raises(SystemExit) as e:
        hf_train.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err and err.count("error:") == 1, err
    assert err.endswith("\n") and "error:" in err.strip().splitlines()[-1], err
    for needle in needles:
        assert needle in err, err
    return err


def test_a_table_for_another_vocabulary_is_refused(tiny, tmp_path, capsys):
    from truneg_fairseq.lexicon import SynonymTable

    other = tmp_path / "other.npz"
    SynonymTable.empty(["<s>", "<pad>", "</s>", "<unk>", "word"]).save(other)
    out = tmp_path / "out"
    expect_error(
        capsys,
        base_args(tiny, out, "--synonym-table", str(other)),
        "built for another vocabulary",
        "--build-synonyms",
    )
    assert not any(out.glob("checkpoint-*"))


def test_a_tokenizer_without_mask_token_is_refused(tiny, tmp_path, capsys):
    import shutil

    bare = tmp_path / "nomask"
    shutil.copytree(tiny / "bert", bare)
    (bare / "tokenizer_config.json").write_text(json.dumps({"mask_token": None}))
    argv = base_args(tiny, tmp_path / "o")
    expect_error(capsys, [str(bare)] + argv[1:], "no mask token")


def test_a_model_without_masked_lm_head_is_refused(tmp_path, capsys, tiny):
    save_bert(tmp_path / "encoder", "BertModel")
    argv = base_args(tiny, tmp_path / "o")
    expect_error(
        capsys,
        [str(tmp_path / "encoder")] + argv[1:],
        "BertModel",
        "masked-LM head",
        "--allow-fresh-head",
    )
    # and in the library: a bare encoder, and an ELECTRA discriminator alone
    from transformers import AutoTokenizer, BertModel, ElectraConfig, ElectraForPreTraining

    from truneg_fairseq.hf import ModelError, TrueNegativeMLM

    tok = AutoTokenizer.from_pretrained(str(tiny / "bert"))
    with pytest.raises(ModelError, match="has no masked-LM head"):
        TrueNegativeMLM(BertModel(bert_config(len(tok))), tok, "soft_reg")
    disc = ElectraForPreTraining(ElectraConfig(vocab_size=len(tok), embedding_size=16, hidden_size=32,
                                               num_hidden_layers=1, num_attention_heads=2, intermediate_size=32))  # fmt: skip
    with pytest.raises(ModelError, match="ElectraPretraining"):
        TrueNegativeMLM(disc, tok, "mlm")


@pytest.mark.slow
def test_allow_fresh_head_trains_a_published_encoder(tmp_path, tiny, capsys):
    """A published encoder without a head (``architectures: ["BertModel"]``, as the
    sentence-transformers BERTs are): --allow-fresh-head loads its encoder, initialises the
    head as transformers does (LayerNorm 1 / 0, zero biases, N(0, initializer_range) dense,
    decoder tied to the word embeddings) and trains it."""
    from transformers import BertForMaskedLM

    from truneg_fairseq.pipelines.hf_train import HFTrainConfig, load_models

    encoder = save_bert(tmp_path / "encoder", "BertModel")
    argv = base_args(tiny, tmp_path / "o", "--max-steps", "2", "--allow-fresh-head")
    assert hf_train.main([str(tmp_path / "encoder")] + argv[1:]) == 0
    log = capsys.readouterr().out
    assert "holds BertModel, without a masked-LM head" in log and "num_updates 2" in log
    trained = BertForMaskedLM.from_pretrained(str(tmp_path / "o")).cls.predictions
    assert not torch.equal(trained.transform.LayerNorm.bias, torch.zeros(32))  # it trained

    _, mlm, _ = load_models(HFTrainConfig(str(tmp_path / "encoder"), "", "", allow_fresh_head=True))
    for k, v in encoder.state_dict().items():
        if not k.startswith("pooler."):
            assert torch.equal(mlm.bert.state_dict()[k], v), k  # the published encoder
    head = mlm.cls.predictions
    assert head.decoder.weight is mlm.bert.embeddings.word_embeddings.weight  # tied
    assert head.decoder.bias is head.bias
    assert torch.equal(head.bias, torch.zeros_like(head.bias))
    assert torch.equal(head.transform.LayerNorm.weight, torch.ones(32))
    assert torch.equal(head.transform.LayerNorm.bias, torch.zeros(32))
    assert torch.equal(head.transform.dense.bias, torch.zeros(32))
    std = head.transform.dense.weight.std().item()
    assert 0.5 < std / mlm.config.initializer_range < 1.5


def test_a_seq_len_above_the_model_positions_is_refused(tiny, tmp_path, capsys):
    """The tiny BERT has 64 positions: --seq-len 65 is refused before training, naming the flag,
    the value and the limit; RoBERTa's positions start after its padding index."""
    from transformers import RobertaConfig, RobertaForMaskedLM

    from truneg_fairseq.hf.loading import position_limit

    out = tmp_path / "o"
    argv = base_args(tiny, out, "--seq-len", "65")
    err = expect_error(
        capsys, argv, "--seq-len 65", "64 tokens a row", "max_position_embeddings 64"
    )
    assert "--seq-len 64 or less" in err and not out.exists()
    roberta = RobertaForMaskedLM(
        RobertaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=66, pad_token_id=1)
    )  # fmt: skip
    assert position_limit(roberta) == 64


def test_sentence_kl_needs_a_model_with_encodings(tiny):
    """A masked-LM model whose forward returns logits only trains with the other objectives (its
    logits gathered at the slots) and is refused for sentence-level KL."""
    from transformers import AutoTokenizer, BertConfig, PreTrainedModel
    from transformers.modeling_outputs import MaskedLMOutput

    from truneg_fairseq.hf import MaskedLMCollator, ModelError, TrueNegativeMLM, tokenize_lines

    class LogitsOnly(PreTrainedModel):
        config_class = BertConfig

        def __init__(self, config):
            super().__init__(config)
            self.emb = torch.nn.Embedding(config.vocab_size, 16)
            self.out = torch.nn.Linear(16, config.vocab_size)

        def get_input_embeddings(self):
            return self.emb

        def get_output_embeddings(self):
            return self.out

        def forward(self, input_ids=None, attention_mask=None, **kwargs):
            return MaskedLMOutput(logits=self.out(self.emb(input_ids)))

    tok = AutoTokenizer.from_pretrained(str(tiny / "bert"))
    model = LogitsOnly(BertConfig(vocab_size=len(tok)))
    with pytest.raises(ModelError, match="sent_kl needs sentence encodings"):
        TrueNegativeMLM(model, tok, "sent_kl")
    obj = TrueNegativeMLM(model, tok, "soft_reg")
    ids = tokenize_lines(tok, tiny_corpus_lines(4), 32)
    out = obj(**MaskedLMCollator(tok)([{"input_ids": x} for x in ids]))
    out["loss"].backward()
    assert out["sample_size"] > 0 and model.out.weight.grad.abs().sum() > 0


@pytest.mark.slow
def test_the_trainer_api_example_runs(tiny, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("\n".join(tiny_corpus_lines(40, seed=6)) + "\n")
    out = subprocess.run(
        [sys.executable, str(REPO / "examples" / "hf" / "trainer_api.py"), str(tiny / "bert"),
         str(text), str(tmp_path / "out"), "2"],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO)),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    from transformers import AutoModelForMaskedLM

    AutoModelForMaskedLM.from_pretrained(str(tmp_path / "out"))


@pytest.mark.slow
def test_electra_pair_run(tmp_path, tiny, capsys):
    """--generator: ELECTRA pre-training of a local pair with hard correction on the generator;
    discriminator/ and generator/ come out as from_pretrained directories, and the run resumes
    from its checkpoint of the two."""
    from hf_fixtures import save_electra_pair
    from transformers import ElectraForMaskedLM, ElectraForPreTraining

    save_electra_pair(tmp_path / "disc", tmp_path / "gen")
    out = tmp_path / "run"
    argv = base_args(tiny, out, "--generator", str(tmp_path / "gen"), "--save-steps", "2")
    argv[0] = str(tmp_path / "disc")
    argv += ["--log-steps", "1", "--rtd-synonym-policy", "original"]
    assert hf_train.main([*argv, "--max-steps", "2"]) == 0
    log = capsys.readouterr().out
    assert "(ELECTRA)" in log and "disc_loss_bits" in log and "rtd_synonym" in log
    assert f"the discriminator is in {out / 'discriminator'}" in log
    ElectraForPreTraining.from_pretrained(str(out / "discriminator"))
    ElectraForMaskedLM.from_pretrained(str(out / "generator"))
    for model in ("discriminator", "generator"):
        assert (out / "checkpoint-2" / model / "model.safetensors").is_file()
    assert hf_train.main([*argv, "--max-steps", "3"]) == 0
    log = capsys.readouterr().out
    assert re.search(r"resuming from \S+checkpoint-2\b", log) and "num_updates 3" in log
    # the output directory given as a model: pointed to the pair it holds
    given = base_args(tiny, tmp_path / "o2", "--generator", str(out / "generator"))
    expect_error(capsys, [str(out)] + given[1:], f"give {out / 'discriminator'} --generator")
    # the discriminator alone is refused, naming --generator
    argv = base_args(tiny, tmp_path / "o")
    expect_error(capsys, [str(tmp_path / "disc")] + argv[1:], "--generator GEN_DIR")


def test_a_hub_id_is_one_error_saying_how_to_make_the_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no folder of that name here
    argv = ["bert-base-uncased", "--train", "t.txt", "--output-dir", "o"]
    expect_error(
        capsys,
        argv,
        "MODEL_DIR bert-base-uncased is not a local model directory",
        "nothing is downloaded at run time",
        "AutoModelForMaskedLM.from_pretrained('bert-base-uncased').save_pretrained('DIR')",
        "hf download bert-base-uncased --local-dir DIR",
        "truneg-convert-hf export",
        "A model directory, offline",
    )
    assert not (tmp_path / "o").exists()
    # the library says the same (HFTrainConfig's run, --build-synonyms)
    from truneg_fairseq.pipelines.hf_train import HFTrainConfig, HFTrainError, load_models

    with pytest.raises(HFTrainError, match="hf download google/electra-small-generator"):
        load_models(HFTrainConfig("google/electra-small-generator", "t.txt", "o"))


def test_a_wordpiece_vocabulary_without_continuation_pieces_is_refused_at_once(
    tiny, tmp_path, capsys
):
    """A hand-made vocab.txt of whole words: refused before anything is loaded (the directory
    has no weights at all here, so any later failure would name them instead)."""
    words = [w for w in wordpiece_vocab() if not w.startswith("##")]
    bare = tmp_path / "words"
    bare.mkdir()
    shutil.copyfile(tiny / "bert" / "config.json", bare / "config.json")
    write_vocab(bare, words)
    argv = base_args(tiny, tmp_path / "o")
    expect_error(
        capsys,
        [str(bare)] + argv[1:],
        f"{bare / 'vocab.txt'} is a WordPiece vocabulary without any '##' continuation pieces",
        "BertWordPieceTokenizer",
    )
    assert not (tmp_path / "o").exists()
    # a tokenizer.json of such a vocabulary likewise; the real vocabulary passes the check
    from tokenizers import BertWordPieceTokenizer

    from truneg_fairseq.hf.model_dir import wordpiece_problem

    BertWordPieceTokenizer({w: i for i, w in enumerate(words)}).save(str(bare / "tokenizer.json"))
    assert "tokenizer.json is a WordPiece vocabulary without" in wordpiece_problem(bare)
    assert wordpiece_problem(tiny / "bert") is None
