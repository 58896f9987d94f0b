"""The HF objectives inside transformers' own contracts, on a tiny local BERT (2 x 32, dropout
off) and a tiny ELECTRA pair, with real ``Trainer`` runs of a few updates: features padded by the
tokenizer keep their attention mask; a plain ``Trainer`` gets the mean loss it expects; losses in
the logs are nats (bits only under ``_bits`` names); the wrapper is the model it wraps for
``load_best_model_at_end``, activation checkpointing, state-dict keys and FLOPs; metrics the
trainer cannot compute are refused; an ELECTRA output directory loads as what it holds; and a
resumed run logs at the interval it is given."""

import json
import logging
import math
import re

import pytest
import torch
from corpus_fixtures import tiny_corpus_lines
from hf_fixtures import save_electra_pair, saved_weights, tiny_bert_and_texts

from truneg_fairseq.cli import hf_train


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_bert_and_texts(tmp_path_factory.mktemp("hf_contracts"))


@pytest.fixture(scope="module")
def tok(tiny):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny / "bert"))


def bert(tiny):
    from transformers import BertForMaskedLM

    return BertForMaskedLM.from_pretrained(str(tiny / "bert"))


def rows(tok, n, seed=9):
    from truneg_fairseq.hf import tokenize_lines

    ids = tokenize_lines(tok, tiny_corpus_lines(n, seed=seed), 32)
    return [{"input_ids": x, "index": i} for i, x in enumerate(ids)]


def arguments(out, **kw):
    from transformers import TrainingArguments

    base = dict(
        per_device_train_batch_size=4, per_device_eval_batch_size=8, learning_rate=1e-3,
        logging_steps=1, report_to=[], use_cpu=True, seed=3, save_strategy="no",
    )  # fmt: skip
    return TrainingArguments(str(out), **{**base, **kw})


def mean_nats(model, batch):
    """transformers' own masked-LM loss of ``batch`` (nats per label): what Trainer expects."""
    return model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        labels=batch["labels"],
    ).loss


# ---- features padded by the tokenizer ------------------------------------------------------------
def test_pre_padded_features_keep_their_attention_mask_token_types_and_specials(tiny, tok):
    """``padding="max_length"`` (run_mlm's --pad_to_max_length): the [PAD] positions stay
    unattended, the token types pass through, and the loss is the one of the unpadded rows; a
    feature's ``special_tokens_mask`` keeps its positions out of the selection."""
    from truneg_fairseq.hf import MaskedLMCollator, TrueNegativeMLM

    lines = tiny_corpus_lines(6, seed=5)
    enc = tok(
        lines[:3], lines[3:], padding="max_length", max_length=48, truncation=True,
        return_special_tokens_mask=True, split_special_tokens=True,
    )  # fmt: skip
    padded = [{**{k: enc[k][i] for k in enc}, "index": i} for i in range(3)]
    real = [sum(f["attention_mask"]) for f in padded]
    assert max(real) < 48  # the rows are padded
    unpadded = [
        {"index": i, **{k: f[k][: real[i]] for k in ("input_ids", "token_type_ids")}}
        for i, f in enumerate(padded)
    ]
    collate = MaskedLMCollator(tok, mask_prob=0.3, seed=2)
    a, b = collate(padded), collate(unpadded)
    assert torch.equal(a["attention_mask"], torch.tensor(enc["attention_mask"]))
    assert int(a["attention_mask"].sum()) == sum(real)
    assert torch.equal(a["token_type_ids"], torch.tensor(enc["token_type_ids"]))
    assert a["token_type_ids"].max() == 1  # the second segment
    t = b["labels"].shape[1]
    assert torch.equal(a["labels"][:, :t], b["labels"]) and (a["labels"][:, t:] == -100).all()

    objective = TrueNegativeMLM(bert(tiny), tok, "mlm").eval()
    with torch.no_grad():
        out_a, out_b = objective(**a), objective(**b)
    assert int(out_a["sample_size"]) == int(out_b["sample_size"]) > 0
    assert torch.allclose(out_a["loss"], out_b["loss"], rtol=1e-5)
    assert float(out_a["logging"]["ntokens"]) == sum(real)

    # the positions a feature marks special are never selected (nearly all others are)
    eager = MaskedLMCollator(tok, mask_prob=0.9, seed=2)
    assert (eager(padded)["labels"][:, 1:4] != -100).any()
    for f in padded:
        f["special_tokens_mask"] = [1 if 1 <= j < 4 else m for j, m in enumerate(f["special_tokens_mask"])]  # fmt: skip
    assert (eager(padded)["labels"][:, 1:4] == -100).all()

    # a left-padded tokenizer: its mask is kept as it is
    left = tok(lines[:3], padding="max_length", max_length=40, padding_side="left")
    pairs = zip(left["input_ids"], left["attention_mask"])
    batch = collate([{"input_ids": x, "attention_mask": m} for x, m in pairs])
    assert torch.equal(batch["attention_mask"], torch.tensor(left["attention_mask"]))
    assert (batch["labels"][batch["attention_mask"] == 0] == -100).all()
    with pytest.raises(ValueError, match="attention_mask has 3 entries and its input_ids 5"):
        collate([{"input_ids": [4, 10, 11, 12, 5], "attention_mask": [1, 1, 1]}])


# ---- a plain Trainer -----------------------------------------------------------------------------
def test_a_plain_trainer_gets_the_mean_loss_and_one_line_on_what_it_logs(
    tiny, tok, tmp_path, caplog
):
    """transformers' Trainer passes num_items_in_batch (the update's labels over its
    micro-batches) and logs the loss it gets back: with learning rate 0 every update sees the same
    4 rows (2 micro-batches of 2), so each logged loss and grad_norm is transformers' own mean
    loss of the 4 rows and the norm of its gradient; the wrapper says once what is not logged."""
    from transformers import Trainer

    from truneg_fairseq.hf import MaskedLMCollator, TrueNegativeMLM

    data = rows(tok, 4)
    collate = MaskedLMCollator(tok, mask_prob=0.3, seed=2)
    reference = bert(tiny)
    loss = mean_nats(reference, collate(data))
    loss.backward()
    params = {id(p): p for p in reference.parameters()}.values()
    norm = torch.norm(torch.stack([p.grad.norm() for p in params if p.grad is not None]))

    args = arguments(
        tmp_path, learning_rate=0.0, max_steps=3, per_device_train_batch_size=2,
        gradient_accumulation_steps=2, remove_unused_columns=False,  # the index: one mask a row
    )  # fmt: skip
    objective = TrueNegativeMLM(bert(tiny), tok, "mlm")
    with caplog.at_level(logging.WARNING, logger="truneg_fairseq.hf.objective"):
        trainer = Trainer(objective, args, data_collator=collate, train_dataset=data)
        trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 3
    for h in logs:
        assert h["loss"] == pytest.approx(loss.item(), rel=1e-4)
        assert h["grad_norm"] == pytest.approx(norm.item(), rel=1e-3)
    assert trainer.state.log_history[-1]["train_loss"] == pytest.approx(loss.item(), rel=1e-4)
    said = [
        r.getMessage() for r in caplog.records if "under transformers' Trainer" in r.getMessage()
    ]
    assert len(said) == 1 and "\n" not in said[0], said
    assert "nats" in said[0] and "TrueNegativeTrainer" in said[0] and "mlm_acc" in said[0]


# ---- units -------------------------------------------------------------------------------------
def test_losses_in_the_logs_are_nats_and_bits_say_so(tiny, tok, tmp_path):
    """``loss``, ``train_loss`` and ``eval_loss`` are nats per masked token, as transformers
    logs them (``exp(eval_loss)`` is the perplexity); fairseq's bit values are ``*_bits``."""
    from truneg_fairseq.hf import MaskedLMCollator, TrueNegativeMLM, TrueNegativeTrainer

    data, valid = rows(tok, 8), rows(tok, 6, seed=11)
    collate = MaskedLMCollator(tok, mask_prob=0.3, seed=2)
    objective = TrueNegativeMLM(bert(tiny), tok, "mlm")
    trainer = TrueNegativeTrainer(
        objective, arguments(tmp_path, max_steps=3), data_collator=collate, train_dataset=data
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 3
    for h in logs:  # one update a log: Trainer's loss is the interval's
        assert h["loss"] == pytest.approx(h["loss_bits"] * math.log(2), rel=1e-3)
        assert h["mlm_loss_bits"] == pytest.approx(h["loss_bits"], abs=1e-3)
        assert not {"mlm_loss", "corrected_loss"} & set(h)
    end = trainer.state.log_history[-1]
    assert end["train_loss"] == pytest.approx(sum(h["loss"] for h in logs) / 3, rel=1e-4)

    metrics = trainer.evaluate(valid)
    with torch.no_grad():
        expected = mean_nats(objective.mlm.eval(), collate(valid)).item()
    assert metrics["eval_loss"] == pytest.approx(expected, rel=1e-5)
    assert metrics["eval_loss_bits"] == pytest.approx(expected / math.log(2), abs=1e-3)
    assert math.exp(metrics["eval_loss"]) == pytest.approx(metrics["eval_ppl"], rel=1e-3)


# ---- the wrapper as the model it wraps ------------------------------------------------------------
def first_is_best():
    """A callback adding an evaluation metric that makes the first checkpoint the best one."""
    from transformers import TrainerCallback

    class FirstIsBest(TrainerCallback):
        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            metrics["eval_age"] = state.global_step

    return FirstIsBest()


@pytest.mark.parametrize("trainer_class", ["TrueNegativeTrainer", "Trainer"])
def test_load_best_model_at_end_loads_the_best_checkpoint(tiny, tok, tmp_path, trainer_class):
    """Checkpoints at every update, the first one the best: the run ends with its weights,
    under the project's trainer and under transformers' own."""
    import transformers

    import truneg_fairseq.hf as hf

    cls = getattr(hf if trainer_class == "TrueNegativeTrainer" else transformers, trainer_class)
    data = rows(tok, 8)
    args = arguments(
        tmp_path, max_steps=3, learning_rate=1e-2, save_strategy="steps", save_steps=1,
        eval_strategy="steps", eval_steps=1, load_best_model_at_end=True,
        metric_for_best_model="age", greater_is_better=False, remove_unused_columns=False,
    )  # fmt: skip
    objective = hf.TrueNegativeMLM(bert(tiny), tok, "mlm")
    trainer = cls(
        objective, args, data_collator=hf.MaskedLMCollator(tok, mask_prob=0.3), train_dataset=data,
        eval_dataset=rows(tok, 4, seed=12), callbacks=[first_is_best()],
    )  # fmt: skip
    trainer.train()
    assert trainer.state.best_model_checkpoint == str(tmp_path / "checkpoint-1")
    best, last = (
        saved_weights(tmp_path / "checkpoint-1"),
        saved_weights(tmp_path / "checkpoint-3"),
    )
    now = objective.mlm.state_dict()
    assert set(best) <= set(now)
    assert all(torch.equal(now[k], best[k]) for k in best)
    assert any(not torch.equal(now[k], last[k]) for k in last)  # not the last update's weights


def test_state_dict_keys_are_the_wrapped_models_own(tiny, tok, tmp_path):
    """The state dict holds what ``save_pretrained`` writes, under the same keys (tied copies
    listed in ``_keys_to_ignore_on_save``); it loads back strictly, and so does the model's
    own file. ELECTRA: ``discriminator.`` and ``generator.``, the directories it is saved in."""
    from transformers import AutoTokenizer, BertForMaskedLM

    from truneg_fairseq.hf import ElectraPretraining, TrueNegativeMLM

    objective = TrueNegativeMLM(bert(tiny), tok, "mlm")
    objective.mlm.save_pretrained(str(tmp_path / "bert"))
    saved = saved_weights(tmp_path / "bert")
    state = objective.state_dict()
    assert set(state) == set(saved)
    assert objective._keys_to_ignore_on_save == [
        "cls.predictions.decoder.weight",
        "cls.predictions.decoder.bias",
    ]
    assert objective.config is objective.mlm.config
    other = TrueNegativeMLM(BertForMaskedLM(objective.config), tok, "mlm")
    assert other.load_state_dict(saved) is not None  # strict
    assert all(torch.equal(other.mlm.state_dict()[k], v) for k, v in saved.items())
    head = other.mlm.cls.predictions
    assert head.decoder.weight is other.mlm.bert.embeddings.word_embeddings.weight  # still tied
    with pytest.raises(RuntimeError, match='Unexpected key.*"bert.extra"'):
        other.load_state_dict({**saved, "bert.extra": torch.zeros(1)})

    save_electra_pair(tmp_path / "disc", tmp_path / "gen")
    from transformers import ElectraForMaskedLM, ElectraForPreTraining

    etok = AutoTokenizer.from_pretrained(str(tmp_path / "disc"))

    def pair():
        return ElectraPretraining(
            ElectraForMaskedLM.from_pretrained(str(tmp_path / "gen")),
            ElectraForPreTraining.from_pretrained(str(tmp_path / "disc")),
            etok,
        )

    electra = pair()
    state = electra.state_dict()
    assert {k.split(".")[0] for k in state} == {"discriminator", "generator"}
    disc_keys = {k[len("discriminator.") :] for k in state if k.startswith("discriminator.")}
    assert disc_keys == set(electra.disc.state_dict())
    assert electra.config is electra.disc.config
    # the shared embeddings are the discriminator's, once
    assert not any(k.startswith("generator.electra.embeddings.") for k in state)
    with torch.no_grad():
        for p in electra.parameters():
            p.add_(1.0)
    again = pair()
    again.load_state_dict(state)  # strict
    for a, b in zip(again.state_dict().values(), electra.state_dict().values()):
        assert torch.equal(a, b)


def test_activation_checkpointing_recomputes_the_layers_and_flops_count(tiny, tok, tmp_path):
    """``gradient_checkpointing=True``: each layer runs again in the backward, and the weights
    end as without it; ``total_flos`` is transformers' estimate for the wrapped model."""
    from truneg_fairseq.hf import MaskedLMCollator, TrueNegativeMLM, TrueNegativeTrainer

    data = rows(tok, 8)
    final, calls = {}, {}
    for checkpointing in (False, True):
        objective = TrueNegativeMLM(bert(tiny), tok, "mlm")
        attention = objective.mlm.bert.encoder.layer[0].attention  # run again when recomputed
        calls[checkpointing] = 0

        def count(*_, on=checkpointing):
            calls[on] += 1

        attention.register_forward_hook(count)
        args = arguments(tmp_path / str(checkpointing), max_steps=2, gradient_checkpointing=checkpointing)  # fmt: skip
        collate = MaskedLMCollator(tok, mask_prob=0.3, pad_to_multiple_of=32)  # 4 x 32 a batch
        trainer = TrueNegativeTrainer(objective, args, data_collator=collate, train_dataset=data)
        trainer.train()
        assert objective.is_activation_checkpointing == checkpointing
        final[checkpointing] = objective.mlm.state_dict()
        params = objective.mlm.num_parameters(exclude_embeddings=True)
        assert trainer.state.total_flos == 6 * 2 * 4 * 32 * params
    assert calls == {False: 2, True: 4}
    for k, v in final[False].items():
        assert torch.allclose(v, final[True][k], atol=1e-6), k


@pytest.mark.parametrize(
    "given", ["compute_metrics", "preprocess_logits_for_metrics", "compute_loss_func"]
)
def test_what_the_trainer_would_not_use_is_refused_in_one_line(tiny, tok, tmp_path, given):
    from truneg_fairseq.hf import TrueNegativeMLM, TrueNegativeTrainer

    objective = TrueNegativeMLM(bert(tiny), tok, "mlm")
    with pytest.raises(ValueError) as e:
        TrueNegativeTrainer(objective, arguments(tmp_path), **{given: lambda *a, **k: None})
    message = str(e.value)
    assert "\n" not in message and f"takes no {given}:" in message
    assert "eval_mlm_acc" in message and "eval_loss in nats" in message


# ---- an ELECTRA output directory -------------------------------------------------------------------
def test_an_electra_output_directory_loads_as_what_it_holds(tmp_path):
    """The discriminator in ``discriminator/`` (ElectraForPreTraining), the generator in
    ``generator/`` (ElectraForMaskedLM, the fill-mask pipeline's), each with the tokenizer and
    no weight missing; the directory itself is no model (at its top a discriminator loaded as a
    masked LM, with a random head). Checkpoints of the layout with the discriminator at the top
    still resume."""
    from transformers import (
        AutoModelForMaskedLM,
        AutoModelForPreTraining,
        AutoTokenizer,
        ElectraForMaskedLM,
        ElectraForPreTraining,
        pipeline,
    )

    from truneg_fairseq.hf import ElectraPretraining, TrueNegativeTrainer

    disc, gen = save_electra_pair(tmp_path / "disc", tmp_path / "gen")
    etok = AutoTokenizer.from_pretrained(str(tmp_path / "disc"))
    objective = ElectraPretraining(gen, disc, etok)
    with torch.no_grad():  # weights of its own: a model loaded from elsewhere differs
        for p in objective.parameters():
            p.add_(0.5)
    out = tmp_path / "out"
    trainer = TrueNegativeTrainer(objective, arguments(out), processing_class=etok)
    trainer.save_model(str(out))

    loaded, info = AutoModelForPreTraining.from_pretrained(
        str(out / "discriminator"), output_loading_info=True
    )
    assert type(loaded) is ElectraForPreTraining and not info["missing_keys"]
    assert all(torch.equal(v, disc.state_dict()[k]) for k, v in loaded.state_dict().items())
    loaded, info = AutoModelForMaskedLM.from_pretrained(
        str(out / "generator"), output_loading_info=True
    )
    assert type(loaded) is ElectraForMaskedLM and not info["missing_keys"]
    assert all(torch.equal(v, gen.state_dict()[k]) for k, v in loaded.state_dict().items())
    fill = pipeline("fill-mask", model=str(out / "generator"))
    assert type(fill.model) is ElectraForMaskedLM
    assert len(fill("the [MASK] is here .")) == 5
    with pytest.raises((OSError, ValueError), match="config.json"):
        AutoModelForMaskedLM.from_pretrained(str(out))

    old = tmp_path / "old"  # the discriminator at the top, the generator in generator/
    disc.save_pretrained(str(old))
    gen.save_pretrained(str(old / "generator"))
    fresh = ElectraPretraining(
        ElectraForMaskedLM.from_pretrained(str(tmp_path / "gen")),
        ElectraForPreTraining.from_pretrained(str(tmp_path / "disc")),
        etok,
    )
    fresh.load_pretrained_weights(old)
    assert all(torch.equal(a, b) for a, b in zip(fresh.parameters(), objective.parameters()))


# ---- resuming with other logging ------------------------------------------------------------------
def test_a_resume_logs_at_the_interval_it_is_given(tiny, tmp_path, capsys):
    """Stopped at update 2 with --log-steps 2, resumed to update 5 with --log-steps 1: a log
    line at each of updates 3, 4 and 5 (the checkpoint's interval gave one at 4)."""
    out = tmp_path / "run"
    argv = [
        str(tiny / "bert"), "--train", str(tiny / "valid.txt"), "--output-dir", str(out),
        "--cpu", "--batch-size", "4", "--seq-len", "32", "--objective", "mlm",
        "--report-to", "none", "--save-steps", "2",
    ]  # fmt: skip
    assert hf_train.main([*argv, "--max-steps", "2", "--log-steps", "2"]) == 0
    first = capsys.readouterr().out
    assert re.findall(r"num_updates (\d+)$", first, re.M) == ["2", "2"]  # the update, the end
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["logging_steps"] == 2
    assert hf_train.main([*argv, "--max-steps", "5", "--log-steps", "1"]) == 0
    log = capsys.readouterr().out
    assert "resuming from" in log
    steps = [m for m in re.findall(r"\| loss [\d.]+ \|.*num_updates (\d+)$", log, re.M)]
    assert steps == ["3", "4", "5"], log[-3000:]
