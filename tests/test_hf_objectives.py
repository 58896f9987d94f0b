"""The HuggingFace path against the fairseq criterions: one tiny BERT and one tiny ELECTRA pair,
built with ``transformers``, imported into the plugin with ``truneg-convert-hf``'s import, fed
the same batch with the same masks (made by ``truneg_fairseq.hf.MaskedLMCollator``) on both
sides: the same loss, gradients and logged statistics for hard correction, soft regularization,
sentence-level KL and ELECTRA.

The vocabulary is written in fairseq's row order ([CLS] [PAD] [SEP] [UNK] ... [MASK]), so that
HF ids and fairseq rows coincide and ELECTRA's sampling noise (one ``rand_like`` over S x V)
lands on the same entries in both worlds."""

import pytest
import torch
from corpus_fixtures import tiny_corpus_lines
from hf_fixtures import _randomize, bert_config, wordpiece_vocab, write_vocab
from objective_cases import fairseq_fields, objective_cases
from step_checks import grads

from truneg_fairseq.convert import hf as hf_convert
from truneg_fairseq.convert.keys import (
    BERT_MLM_HEAD,
    DISCRIMINATOR_HEAD,
    ELECTRA_PROJECTION,
    GENERATOR_HEAD,
    _layer_table,
)
from truneg_fairseq.core import objectives

MASK_PROB = 0.3  # more masks per row: more corrections to compare
LOSS_TOL = dict(rtol=1e-5, atol=1e-5)
GRAD_TOL = dict(rtol=1e-4, atol=2e-6)
# every registered objective, its weights away from their defaults: on BERT, and on the ELECTRA
# pair (the objective on the generator's term) with the discriminator's term
CASES = objective_cases(moved=True)
PAIR_CASES = objective_cases(discriminator=True, moved=True)


def fairseq_order_vocab():
    """The fixture's WordPiece vocabulary with the specials where fairseq puts them."""
    vocab = wordpiece_vocab()
    firsts = ["[CLS]", "[PAD]", "[SEP]", "[UNK]"]
    return firsts + [t for t in vocab if t not in firsts + ["[MASK]"]] + ["[MASK]"]


@pytest.fixture(scope="module")
def world(tmp_path_factory, wn):
    """HF BERT + ELECTRA pair (predictions pushed toward "main", a synonym of several corpus
    words), their fairseq imports, the HF tokenizer, a synonym table for each world and a batch."""
    import transformers
    from transformers import AutoTokenizer

    from truneg_fairseq.hf import MaskedLMCollator, build_synonym_table, tokenize_lines
    from truneg_fairseq.lexicon import build_table, vocab_view
    from truneg_fairseq.text import wordpiece_row_order

    root = tmp_path_factory.mktemp("hf_objectives")
    vocab = fairseq_order_vocab()
    assert wordpiece_row_order(vocab) == list(range(len(vocab)))
    main = vocab.index("main")
    torch.manual_seed(0)
    bert = transformers.BertForMaskedLM(bert_config(len(vocab), pad_token_id=1)).eval()
    _randomize(bert, 0)
    with torch.no_grad():
        bert.cls.predictions.bias[main] += 4.0
    bert.save_pretrained(str(root / "bert_hf"))
    write_vocab(root / "bert_hf", vocab)

    common = dict(vocab_size=len(vocab), max_position_embeddings=64, pad_token_id=1)
    cfg = transformers.ElectraConfig
    disc = transformers.ElectraForPreTraining(
        cfg(embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, **common)
    ).eval()  # fmt: skip
    gen = transformers.ElectraForMaskedLM(
        cfg(embedding_size=16, hidden_size=16, num_hidden_layers=2, num_attention_heads=1,
            intermediate_size=32, **common)
    ).eval()  # fmt: skip
    _randomize(disc, 1)
    _randomize(gen, 2)
    gen.electra.embeddings.load_state_dict(disc.electra.embeddings.state_dict())
    with torch.no_grad():
        gen.generator_lm_head.bias[main] += 4.0
    for name, m in (("disc_hf", disc), ("gen_hf", gen)):
        m.save_pretrained(str(root / name))
        write_vocab(root / name, vocab)

    bert_fs = hf_convert.import_hf(root / "bert_hf", root / "bert_fs")
    electra_fs = hf_convert.import_hf(root / "disc_hf", root / "electra_fs", root / "gen_hf")
    tok = AutoTokenizer.from_pretrained(str(root / "bert_hf"))
    table, _ = build_synonym_table(tok, wn=wn)
    fs_table, _ = build_table(
        vocab_view(bert_fs / "dict.txt", "wordpiece", vocab=bert_fs / "vocab.txt"), wn=wn
    )
    fs_table.save(root / "synonyms.npz")
    lines = [ln for ln in tiny_corpus_lines(400, seed=5) if "primary" in ln or "chief" in ln]
    ids = tokenize_lines(tok, lines[:10], 64)
    batch = MaskedLMCollator(tok, mask_prob=MASK_PROB, seed=3)(
        [{"input_ids": x, "index": i} for i, x in enumerate(ids)]
    )
    return dict(
        root=root, tok=tok, table=table, fs_table=fs_table, batch=batch,
        bert_fs=bert_fs, electra_fs=electra_fs,
    )  # fmt: skip


def test_the_tables_of_both_worlds_agree(world):
    """The table built from the HF tokenizer holds the pairs, pieces and content words of the
    table built for the imported dict.txt (the ids coincide here)."""
    a, b = world["table"], world["fs_table"]
    assert len(a) > 0
    assert a.pairs.tolist() == b.pairs.tolist()
    assert a.continuation_ids.tolist() == b.continuation_ids.tolist()
    assert a.content_ids.tolist() == b.content_ids.tolist()
    assert a.fingerprint != b.fingerprint  # [CLS] is not <s>: a table is for one vocabulary


def fairseq_sample(batch, pad: int):
    ids, labels = batch["input_ids"], batch["labels"]
    return {
        "net_input": {"src_tokens": ids, "src_lengths": batch["attention_mask"].sum(1)},
        "target": labels.masked_fill(labels.eq(-100), pad),
        "ntokens": int(batch["attention_mask"].sum()),
        "nsentences": ids.size(0),
    }


def fairseq_criterion(name, world, task, arch, **fields):
    """The fairseq criterion of the objective ``name`` (``fields``: its config's)."""
    from fairseq.criterions import CRITERION_DATACLASS_REGISTRY, CRITERION_REGISTRY

    criterion = objectives.get(name).criterion
    cls, cfg_cls = CRITERION_REGISTRY[criterion], CRITERION_DATACLASS_REGISTRY[criterion]
    cfg = cfg_cls(
        synonym_table=str(world["root"] / "synonyms.npz"),
        mlm_prediction_slots="static",
        mask_prob=MASK_PROB,
        arch=arch,
        **fields,
    )
    return cls(cfg, task)


def assert_same_logs(fs_log, hf_log):
    from truneg_fairseq.hf.stats import reduce

    assert set(fs_log) == set(hf_log)
    for k in fs_log:
        assert float(fs_log[k]) == pytest.approx(float(hf_log[k]), rel=1e-5, abs=1e-5), k
    fs_vals = reduce({k: float(v) for k, v in fs_log.items()})
    assert fs_vals == reduce({k: float(v) for k, v in hf_log.items()})
    assert {"loss", "mlm_loss", "mlm_acc", "syn_acc", "pred_corr_ratio"} <= set(fs_vals)


def assert_same_grads(fs, hf, pairs):
    """``pairs``: (HF name, fairseq name) of parameters holding the same tensor."""
    assert pairs
    for h, f in pairs:
        assert h in hf and f in fs, (h, f)
        assert torch.allclose(hf[h], fs[f], **GRAD_TOL), (h, f, (hf[h] - fs[f]).abs().max())


def table_pairs(table, hf_base="", fs_base=""):
    return [(hf_base + h + p, fs_base + f + p) for h, f in table for p in ("weight", "bias")]


BERT_PAIRS = (
    [
        ("bert.embeddings.word_embeddings.weight", "encoder.sentence_encoder.embed_tokens.weight"),
        ("cls.predictions.bias", "encoder.lm_head.bias"),
    ]
    + table_pairs(
        (("embeddings.LayerNorm.", "layernorm_embedding."),), "bert.", "encoder.sentence_encoder."
    )
    + table_pairs(_layer_table("bert.encoder.layer.", "encoder.sentence_encoder.layers.", 2))
    + table_pairs(BERT_MLM_HEAD)
)


@pytest.mark.parametrize("objective,params", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bert_objectives_equal_the_fairseq_criterions(world, objective, params):
    from transformers import BertForMaskedLM

    from truneg_fairseq.checkpoints import load_for_inference
    from truneg_fairseq.hf import TrueNegativeMLM

    models, _, task = load_for_inference(world["bert_fs"] / "model.pt")
    fs_model = models[0]
    crit = fairseq_criterion(
        objective, world, task, "bert_hf_tiny", **fairseq_fields(objective, params)
    )
    sample = fairseq_sample(world["batch"], task.source_dictionary.pad())
    fs_loss, fs_size, fs_log = crit(fs_model, sample)
    fs_loss.backward()

    hf_model = BertForMaskedLM.from_pretrained(str(world["root"] / "bert_hf")).eval()
    obj = TrueNegativeMLM(hf_model, world["tok"], objective, world["table"], **params)
    out = obj(**world["batch"])
    out["loss"].backward()

    assert int(out["sample_size"]) == int(fs_size) > 0
    assert torch.allclose(out["loss"], fs_loss, **LOSS_TOL)
    assert_same_logs(fs_log, out["logging"])
    if objectives.get(objective).needs_table:
        assert 0 < int(fs_log["fn_synonym"]) < int(fs_log["fn_masked"])  # some, not all, corrected
    assert_same_grads(grads(fs_model), grads(hf_model), BERT_PAIRS)


@pytest.mark.parametrize(
    "objective,params", [c[1:] for c in PAIR_CASES], ids=[c[0] for c in PAIR_CASES]
)
def test_electra_pair_equals_the_fairseq_electra(world, objective, params):
    from transformers import ElectraForMaskedLM, ElectraForPreTraining

    from truneg_fairseq.checkpoints import load_for_inference
    from truneg_fairseq.hf import ElectraPretraining

    models, _, task = load_for_inference(world["electra_fs"] / "model.pt")
    fs_model = models[0]
    pad = task.source_dictionary.pad()
    crit = fairseq_criterion(
        objective, world, task, "electra_tiny", electra_rtd_synonym_policy="ignore",
        **fairseq_fields(objective, params),
    )  # fmt: skip
    torch.manual_seed(11)
    fs_loss, fs_size, fs_log = crit(fs_model, fairseq_sample(world["batch"], pad))
    fs_loss.backward()

    gen = ElectraForMaskedLM.from_pretrained(str(world["root"] / "gen_hf")).eval()
    disc = ElectraForPreTraining.from_pretrained(str(world["root"] / "disc_hf")).eval()
    obj = ElectraPretraining(
        gen, disc, world["tok"], objective, world["table"], mask_prob=MASK_PROB,
        rtd_synonym_policy="ignore", **params,
    )  # fmt: skip
    assert obj.shared_embeddings and gen.generator_lm_head.weight is (
        disc.electra.embeddings.word_embeddings.weight
    )
    torch.manual_seed(11)
    out = obj(**world["batch"])
    out["loss"].backward()

    assert int(out["sample_size"]) == int(fs_size) > 0
    assert torch.allclose(out["loss"], fs_loss, **LOSS_TOL)
    assert_same_logs(fs_log, out["logging"])
    assert int(fs_log["rtd_replaced"]) > 0
    hf_grads = {**grads(disc), **{"gen." + k: v for k, v in grads(gen).items()}}
    pairs = (
        [
            ("electra.embeddings.word_embeddings.weight", "embeddings.embed_tokens.weight"),
            ("gen.generator_lm_head.bias", "generator_bias"),
        ]
        + table_pairs((("electra.embeddings.LayerNorm.", "embeddings.layer_norm."),))
        + table_pairs(_layer_table("electra.encoder.layer.", "discriminator.layers.", 2))
        + table_pairs(_layer_table("electra.encoder.layer.", "generator.layers.", 2), "gen.")
        + table_pairs(DISCRIMINATOR_HEAD)
        + table_pairs(GENERATOR_HEAD, "gen.")
        + table_pairs(ELECTRA_PROJECTION, fs_base="discriminator.")
    )
    assert_same_grads(grads(fs_model), hf_grads, pairs)
