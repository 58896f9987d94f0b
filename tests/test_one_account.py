"""One account of the false-negative numbers: fairseq's valid pass (the training criterion's
``reduce_metrics``, what ``fairseq-train`` and ``fairseq-validate`` log) and evaluate_mlm.py
give the same values on the same masks, for RoBERTa and for ELECTRA; content words come from
the tokenizer for a GPT-2 byte-level BPE dictionary too."""

import json
from pathlib import Path

import pytest
import torch
from corpus_fixtures import word_level_data
from fairseq_runs import TINY_ELECTRA, TINY_ROBERTA, fairseq_train

from truneg_fairseq.evaluation import false_negatives as fn

# short lines (one sequence each: --sample-break-mode eos), so that some sequences hold no mask
SHORT = [
    "the big house is large .",
    "a small house .",
    "the large dog saw a big big cat .",
    "big .",
    "the cat saw the big house near the lake .",
    "a little dog .",
]
VALID = SHORT * 4
TRAIN = (SHORT + ["a little house near the lake .", "the small dog is little ."]) * 15
MODELS = {
    "roberta": ([*TINY_ROBERTA], "encoder.lm_head.bias"),
    "electra": ([*TINY_ELECTRA, "--task", "electra"], "generator_bias"),
}


@pytest.fixture(scope="module")
def words(tmp_path_factory, wn):
    return word_level_data(tmp_path_factory.mktemp("account"), TRAIN, VALID, wn)


@pytest.fixture(scope="module")
def checkpoints(words, tmp_path_factory):
    """A hard-correction checkpoint of each model kind (1 real update) whose masked-LM head leans
    to "large" (a WordNet synonym of "big") without always predicting it: the logit bias of
    "large" is raised by 3, so the predictions mix gold words, "large" and others."""
    from fairseq.data import Dictionary

    root = tmp_path_factory.mktemp("account_ck")
    large = Dictionary.load(str(words / "dict.txt")).index("large")
    out = {}
    for kind, (args, bias_key) in MODELS.items():
        fairseq_train(
            words,
            root / kind,
            [
                *args,
                "--criterion",
                "mlm_hard_correction",
                "--synonym-table",
                "synonyms.npz",
                "--sample-break-mode",
                "eos",
                "--max-update",
                "1",
                "--disable-validation",
            ],
        )
        ck = root / kind / "checkpoint_last.pt"
        state = torch.load(ck, map_location="cpu", weights_only=False)
        state["model"][bias_key][large] += 3.0
        torch.save(state, root / f"{kind}.pt")
        out[kind] = root / f"{kind}.pt"
    return out


def _fairseq_valid(ck: Path, data: Path, batch_size: int):
    """(values, model, task, samples): the training criterion on the valid split as fairseq's
    valid pass runs it (task.valid_step per batch, task.reduce_metrics per batch, one aggregate)."""
    from fairseq.logging import metrics

    from truneg_fairseq.checkpoints import load_for_inference

    models, cfg, task = load_for_inference(str(ck), str(data), {"seed": 1})
    model = models[0]
    crit = task.build_criterion(cfg.criterion)
    assert type(crit).__name__ == "HardCorrectionLoss" or "HardCorrection" in type(crit).__name__
    task.load_dataset("valid", combine=False, epoch=1)
    samples = list(
        task.get_batch_iterator(
            dataset=task.dataset("valid"), max_sentences=batch_size, seed=1, num_workers=0
        ).next_epoch_itr(shuffle=False)
    )
    with metrics.aggregate(new_root=True) as agg:
        for sample in samples:
            _, _, log = task.valid_step(sample, model, crit)
            task.reduce_metrics([log], crit)
        values = agg.get_smoothed_values()
    return values, model, cfg, task, samples


@pytest.mark.parametrize("kind", list(MODELS))
def test_fairseq_valid_log_and_evaluate_mlm_agree(kind, words, checkpoints):
    from truneg_fairseq.pipelines.evaluate_mlm import evaluate_mlm
    from truneg_fairseq.pipelines.scorer import MaskedLMScorer

    table = str(words / "synonyms.npz")
    # one batch, the same masks fed to both: the training criterion's valid pass and the scorer
    one, model, cfg, task, samples = _fairseq_valid(checkpoints[kind], words, batch_size=len(VALID))
    assert len(samples) == 1
    r1 = MaskedLMScorer(model, task, cfg.model._name, table).score(samples).report
    # the whole split in batches of 8, and evaluate_mlm.py's function (its own loading and
    # batching, the same seed)
    values, _, _, _, _ = _fairseq_valid(checkpoints[kind], words, batch_size=8)
    scored = evaluate_mlm(str(checkpoints[kind]), str(words), table, batch_size=8, seed=1)
    r = scored.report
    for got, ref in ((one, r1), (values, r), (values, r1)):
        for key, decimals in fn.LOGGED:
            assert got[key] == pytest.approx(
                round(getattr(ref, key), decimals), abs=10**-decimals
            ), (kind, key)
        assert got["nseq"] == ref.sequences == len(VALID)
        assert got["special_masked"] == ref.special_masked
    # the numbers say something: synonym predictions among mispredictions, sequences without a mask
    assert 0 < r.pred_corr_ratio < 100 and r.mlm_acc < 100 and r.content_pred > 0
    assert 0 < r.masked_sequences < r.sequences
    assert r.iter_corr_ratio == pytest.approx(
        100 * scored.counts.synonym_sequences / r.masked_sequences
    )


def test_evaluate_mlm_json_reports_every_value_and_the_counts(words, checkpoints, capsys):
    from command_runs import run_script

    proc = run_script(
        "evaluate_mlm.py",
        [
            "--data",
            str(words),
            "--synonym-table",
            str(words / "synonyms.npz"),
            "--json",
            "--device",
            "cpu",
            str(checkpoints["roberta"]),
        ],
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in (
        "mlm_loss",
        "mlm_acc",
        "syn_acc",
        "pred_corr_ratio",
        "iter_corr_ratio",
        "iter_corr_ratio_512",
        "content_pred",
        "masked",
        "sequences",
        "special_masked",
    ):
        assert key in res, key
    c = fn.Counts(**res["counts"])
    assert fn.derive(c).pred_corr_ratio == pytest.approx(res["pred_corr_ratio"])
    assert f"scored {len(VALID)} sequences of valid" in proc.stdout + proc.stderr


# ---- content words through the tokenizer: GPT-2 byte-level BPE ---------------------------------------
def test_content_words_of_a_gpt2_bpe_dictionary(tmp_path, wn):
    """A byte-level BPE trained here (HF tokenizers; its vocab.json and merges.txt are GPT-2's
    encoder.json and vocab.bpe), a fairseq dict.txt of decimal BPE ids: the synonym table's
    content entries are the word-start entries of letters that are not stopwords, and the
    content share of predictions matches a hand count."""
    from fairseq.data import Dictionary
    from tokenizers import ByteLevelBPETokenizer

    from truneg_fairseq.core.lookup import SynonymLookup
    from truneg_fairseq.lexicon import build_table, vocab_view
    from truneg_fairseq.text import TokenizerSpec, build_tokenizer

    lines = SHORT * 20 + ["the primary reason is the main reason , the chief goal ."] * 20
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(lines, vocab_size=600, min_frequency=1, show_progress=False)
    bpe.save_model(str(tmp_path))
    enc, merges = tmp_path / "vocab.json", tmp_path / "merges.txt"
    tok = build_tokenizer(
        TokenizerSpec("gpt2", gpt2_encoder_json=str(enc), gpt2_vocab_bpe=str(merges))
    )
    d = Dictionary()
    for line in lines:
        for piece in tok.pieces(line):
            d.add_symbol(piece)
    d.finalize(padding_factor=1)
    d.save(str(tmp_path / "dict.txt"))
    d = Dictionary.load(str(tmp_path / "dict.txt"))
    assert all(s.isdigit() for s in d.symbols[d.nspecial :])  # no entry is alphabetic as written
    table, _ = build_table(
        vocab_view(tmp_path / "dict.txt", "gpt2", gpt2_encoder_json=enc), source="wordnet", wn=wn
    )
    decoded = {i: tok.decoder[int(s)] for i, s in enumerate(d.symbols) if i >= d.nspecial}
    content = {decoded[i] for i in table.content_ids.tolist()}
    assert {"\u0120big", "\u0120house", "\u0120primary", "\u0120main"} <= content
    assert not content & {
        "\u0120the",
        "\u0120a",
        "\u0120is",
        "\u0120,",
        "\u0120.",
    }  # stopwords, punctuation
    assert all(w.startswith("\u0120") for w in content)  # word starts only
    assert table.pairs.size > 0  # primary/main/chief are synonyms here
    # the statistics: predictions "Ġhouse", "Ġthe", ",", "Ġbig" at 4 masked words -> 2 content words
    lookup = SynonymLookup(table, len(d))
    idx = {decoded[i]: i for i in decoded}
    pred = torch.tensor([idx["\u0120house"], idx["\u0120the"], idx["\u0120,"], idx["\u0120big"]])
    gold = torch.full_like(pred, idx["\u0120cat"])
    word = torch.ones(4, dtype=torch.bool)
    log = fn.step_counts(
        lambda x: x.view(1, -1).any(dim=1),
        word,
        pred.eq(gold),
        ~word,
        1,
        lookup.is_synonym(gold, pred),
        lookup.content[pred],
    )
    assert fn.derive(fn.Counts.from_logs([log])).content_pred == 50.0
