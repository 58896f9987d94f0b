"""truneg-hf-train and TrueNegativeTrainer on a tiny local BERT (2 x 32, dropout off): a run with
checkpoints, evaluation, tensorboard and the fairseq statistics in the log; a resume; two
processes under torchrun (gloo) equal to one process with gradient accumulation 2; and each bad
input refused with one message before training starts."""

import json
import os
import re
import subprocess
import sys

import pytest
import torch
from hf_fixtures import bert_config, save_bert, wordpiece_vocab, write_vocab
from utils import REPO, tiny_corpus_lines

from truneg_fairseq.cli import hf_train


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A BERT masked-LM directory (no dropout: runs compare weight for weight) and texts."""
    import transformers

    root = tmp_path_factory.mktemp("hf_trainer")
    vocab = wordpiece_vocab()
    torch.manual_seed(0)
    cfg = bert_config(len(vocab), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    transformers.BertForMaskedLM(cfg).save_pretrained(str(root / "bert"))
    write_vocab(root / "bert", vocab)
    lines = tiny_corpus_lines(120, seed=4)
    (root / "texts").mkdir()
    (root / "texts" / "a.txt").write_text("\n".join(lines[:50]) + "\n\n")
    (root / "texts" / "b.txt").write_text("\n".join(lines[50:100]) + "\n")
    (root / "valid.txt").write_text("\n".join(lines[100:]) + "\n")
    return root


def base_args(tiny, out, *extra):
    return [
        str(tiny / "bert"), "--train", str(tiny / "texts"), "--output-dir", str(out),
        "--cpu", "--batch-size", "4", "--seq-len", "32", "--mask-prob", "0.3",
        "--lr", "1e-3", "--report-to", "none", *extra,
    ]  # fmt: skip


def weights(path):
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


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
    values = line.split("INFO | truneg_fairseq.hf.train | ")[1]
    for name in ("loss", "mlm_loss", "corrected_loss", "ppl", "mlm_acc", "syn_acc"):
        assert re.search(rf"(^|\| ){name} [\d.]+", values), name
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
    straight = weights(out)

    # interrupted after 4 updates, in the middle of saving checkpoint-6: the same command goes
    # on from checkpoint-4, the last complete one, and ends where the run without interruption
    # ended (optimizer, schedule, data position and masks as they were)
    shutil.rmtree(out / "checkpoint-6")
    (out / "model.safetensors").unlink()
    (out / "checkpoint-6").mkdir()
    (out / "checkpoint-6" / "config.json").write_text("{")
    assert hf_train.main(args) == 0
    log = capsys.readouterr().out
    assert re.search(r"resuming from \S+checkpoint-4\b", log) and "incomplete checkpoint" in log
    assert "num_updates 6" in log and "num_updates 2 " not in log
    resumed = weights(out)
    for k in straight:
        assert torch.allclose(resumed[k], straight[k], atol=1e-6, rtol=1e-5), k


@pytest.mark.slow
def test_two_processes_equal_one_with_gradient_accumulation(tiny, tmp_path):
    """torchrun --nproc_per_node 2 (gloo) against one process with --grad-accum 2: the same
    updates, so the same final weights (the masks follow the example, not the process)."""
    steps = ["--max-steps", "3", "--save-steps", "100", "--log-steps", "1", "--batch-size", "3"]
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
    assert two.stdout.count("examples (one per non-empty line") == 1, two.stdout[-3000:]
    assert two.stdout.count("x 2 sequences") == 1
    assert hf_train.main(base_args(tiny, tmp_path / "one", *steps, "--grad-accum", "2")) == 0
    a, b = weights(tmp_path / "two"), weights(tmp_path / "one")
    start = weights(tiny / "bert")
    assert a.keys() == b.keys()
    moved = max((a[k] - start[k]).abs().max().item() for k in a if k in start)
    assert moved > 1e-3  # it trained
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-5, rtol=1e-4), (k, (a[k] - b[k]).abs().max())


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
    expect_error(capsys, [str(tmp_path / "encoder")] + argv[1:], "BertModel", "masked-LM head")
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
    the discriminator and generator/ come out as from_pretrained directories."""
    from hf_fixtures import save_electra_pair
    from transformers import ElectraForMaskedLM, ElectraForPreTraining

    save_electra_pair(tmp_path / "disc", tmp_path / "gen")
    out = tmp_path / "run"
    argv = base_args(tiny, out, "--generator", str(tmp_path / "gen"), "--max-steps", "2")
    argv[0] = str(tmp_path / "disc")
    assert hf_train.main([*argv, "--log-steps", "1", "--rtd-synonym-policy", "original"]) == 0
    log = capsys.readouterr().out
    assert "(ELECTRA)" in log and "disc_loss" in log and "rtd_synonym" in log
    ElectraForPreTraining.from_pretrained(str(out))
    ElectraForMaskedLM.from_pretrained(str(out / "generator"))
    # the discriminator alone is refused, naming --generator
    argv = base_args(tiny, tmp_path / "o")
    expect_error(capsys, [str(tmp_path / "disc")] + argv[1:], "--generator GEN_DIR")
