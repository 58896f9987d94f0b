"""CLINE: example construction on real WordNet and sentencepiece, the loss terms, the task and
criterion on a tiny model, Hits, bad input."""

import json
import math
import random
import shutil

import numpy as np
import pytest
import torch
from command_runs import run_script
from corpus_fixtures import tiny_corpus_lines
from fairseq_runs import build_components, valid_batch

from truneg_fairseq.text import TokenizerSpec

TINY_CLINE = ["--arch", "cline_roberta_tiny", "--tokens-per-sample", "64"]
NO_ELIGIBLE = ["it is 42 .", "and so on , then ."]


@pytest.fixture(scope="module")
def lex(wn):
    from truneg_fairseq.lexicon.replace import Lexicon

    return Lexicon(wn)


@pytest.fixture(scope="module")
def cline_dir(corpus_dir, tmp_path_factory, wn):
    """CLINE triples of the tiny corpus (plus sentences without an eligible word), binarized
    with the corpus's own dictionary."""
    from truneg_fairseq.data import cline_data as cline

    work = tmp_path_factory.mktemp("cline")
    train = (corpus_dir / "raw" / "train.txt").read_text().splitlines()[:400] + NO_ELIGIBLE
    (work / "train.txt").write_text("\n".join(train) + "\n")
    shutil.copy(corpus_dir / "raw" / "valid.txt", work / "valid.txt")
    settings = cline.Settings(
        seed=5, tokenizer=TokenizerSpec("sentencepiece", spm_model=str(corpus_dir / "spm.model"))
    )
    summary = cline.make_cline_data(
        {"train": work / "train.txt", "valid": work / "valid.txt"},
        work / "out",
        settings,
        srcdict=corpus_dir / "data-bin" / "dict.txt",
        wn=wn,
    )
    return work, summary


# ---- construction -------------------------------------------------------------------------------


def test_replacements_are_wordnet_words_of_the_same_part_of_speech(lex, wn):
    from truneg_fairseq.data import cline_data as cline

    lines = tiny_corpus_lines(300, seed=3)
    vocab = cline.collect_vocabulary(lines, lex)
    kinds = set()
    n_elig = n_syn = n_ant = 0
    for i, line in enumerate(lines):
        t = cline.build_triple(line, lex, vocab, random.Random(i))
        n_elig += t.eligible
        n_syn += len(t.syn_edits)
        n_ant += len(t.ant_edits)
        for idx, old, new, kind in t.syn_edits + t.ant_edits:
            pos, base = lex.pos_and_base(old.lower())
            low = old.lower()
            kinds.add(kind)
            assert new.isalpha() and " " not in new and "_" not in new
            if kind == "synonym":
                assert new in lex.synonyms(low, pos, base)
                assert any(
                    pos == s.pos().replace("s", "a")
                    and new in [lemma.name() for lemma in s.lemmas()]
                    for s in wn.synsets(base)
                )
            elif kind == "hypernym":
                assert new in lex.hypernyms(low, pos, base)
            elif kind == "variant":
                assert wn.morphy(new, pos) == base
            elif kind == "antonym":
                assert new in lex.antonyms(low, pos, base)
            else:
                assert kind == "random" and lex.pos_and_base(new)[0] == pos and new != low
        for idx, _, new, _ in t.syn_edits:
            assert t.syn[idx] != t.ori[idx] and t.syn_cores[idx] is not None
        assert sum(c is not None for c in t.syn_cores) == len(t.syn_edits)
        assert [w for w, c in zip(t.ant, t.ant_cores) if c is None] == [
            w for w, c in zip(t.ori, t.ant_cores) if c is None
        ]
    assert {"synonym", "hypernym", "antonym", "random"} <= kinds
    assert 0.33 <= n_syn / n_elig <= 0.47
    assert 0.17 <= n_ant / n_elig <= 0.30


def test_part_of_speech_and_candidates_from_wordnet(lex):
    assert lex.pos_and_base("primary") == ("a", "primary")
    assert lex.pos_and_base("ran") == ("v", "run")
    assert lex.pos_and_base("cars") == ("n", "car")
    assert lex.pos_and_base("quickly")[0] == "r"
    assert lex.pos_and_base("the") is None and lex.pos_and_base("xqzv") is None
    assert "main" in lex.synonyms("primary", "a", "primary")
    assert lex.antonyms("quickly", "r", "quickly") == ["slowly"]
    assert all(
        " " not in w and "_" not in w
        for w in lex.synonyms("house", "n", "house") + lex.hypernyms("house", "n", "house")
    )


def test_labels_mark_exactly_the_replaced_pieces(corpus_dir, lex):
    import sentencepiece as spm

    from truneg_fairseq.data import cline_data as cline

    enc = cline.PieceEncoder(TokenizerSpec("sentencepiece", spm_model=corpus_dir / "spm.model"))
    sp = spm.SentencePieceProcessor(model_file=str(corpus_dir / "spm.model"))
    lines = tiny_corpus_lines(60, seed=4) + ["The primary reason, surely, is (quick)."]
    vocab = cline.collect_vocabulary(lines, lex)
    for i, line in enumerate(lines):
        t = cline.build_triple(line, lex, vocab, random.Random(i))
        ori, lab0 = enc.tokens_and_labels(t.ori, [None] * len(t.ori))
        assert (
            ori == sp.encode(line, out_type=str) and sum(lab0) == 0
        )  # word by word == the whole line
        for words, cores in ((t.syn, t.syn_cores), (t.ant, t.ant_cores)):
            toks, labels = enc.tokens_and_labels(words, cores)
            assert toks == sp.encode(" ".join(words), out_type=str)
            per_word = enc.encode_words(words)
            k = 0
            for w, spans, core in zip(words, per_word, cores):
                got = labels[k : k + len(spans)]
                k += len(spans)
                if core is None:
                    assert got == [0] * len(spans)
                else:  # the pieces of the new core, not the punctuation around it
                    marked = "".join(
                        p.lstrip("\u2581") for (p, _, _), label in zip(spans, got) if label
                    )
                    assert marked == w[core[0] : core[1]]


def test_gpt2_pieces_and_labels(tmp_path, lex):
    from corpus_fixtures import write_toy_gpt2_bpe
    from fairseq.data.encoders.gpt2_bpe_utils import get_encoder

    from truneg_fairseq.data import cline_data as cline

    d = write_toy_gpt2_bpe(tmp_path)
    enc = cline.PieceEncoder(
        TokenizerSpec("gpt2", gpt2_encoder_json=d / "encoder.json", gpt2_vocab_bpe=d / "vocab.bpe")
    )
    bpe = get_encoder(str(d / "encoder.json"), str(d / "vocab.bpe"))
    words = ["The", "primary", "reason,", "surely."]
    cores = [None, (0, 4), (0, 6), None]  # "main" replaced "primary"; "reason" replaced
    words[1] = "main"
    toks, labels = enc.tokens_and_labels(words, cores)
    assert toks == [str(i) for i in bpe.encode(" ".join(words))]
    text = [bpe.decoder[int(t)] for t, label in zip(toks, labels) if label]
    # the toy BPE keeps the space as its own token "Ġ": it is not part of a replaced core
    assert "".join(text) == "mainreason"


def test_wordpiece_pieces_and_labels(tmp_path, lex):
    """WordPiece through the tokenizer layer: pieces equal HF tokenizers' on the whole line, and
    the labels mark the pieces of the replaced cores (## continuations included)."""
    from test_tokenizer import VOCAB, write_vocab
    from tokenizers import BertWordPieceTokenizer

    from truneg_fairseq.data import cline_data as cline

    vocab = write_vocab(tmp_path / "vocab.txt", VOCAB)
    enc = cline.PieceEncoder(TokenizerSpec("wordpiece", vocab=str(vocab)))
    hf = BertWordPieceTokenizer(str(vocab), lowercase=True)
    words = ["The", "farmer", "plays", "near", "the", "big", "lake."]
    cores = [None, None, (0, 5), None, None, (0, 3), None]  # "plays" and "big" were put in
    toks, labels = enc.tokens_and_labels(words, cores)
    assert toks == hf.encode(" ".join(words), add_special_tokens=False).tokens
    assert [t for t, label in zip(toks, labels) if label] == ["play", "##s", "big"]


def test_data_bin_summary_and_determinism(cline_dir, corpus_dir, wn, tmp_path):
    from fairseq.data import Dictionary, data_utils

    from truneg_fairseq.data import cline_data as cline

    work, summary = cline_dir
    out = work / "out"
    s = summary["train"]
    assert s["sentences"] == 402 and s["no_eligible"] == 2
    assert 0.35 <= s["syn_rate"] <= 0.5 and 0.17 <= s["ant_rate"] <= 0.3
    # the 200-entry corpus dictionary lacks some pieces of inserted words: counted as unknown
    assert 0 < s["without_antonym_share"] < 1 and s["unknown_tokens"] > 0
    assert json.loads((out / "cline_summary.json").read_text()) == summary
    meta = json.loads((out / "data-bin" / "cline_meta.json").read_text())
    assert meta["summary"] == summary
    assert (out / "data-bin" / "dict.txt").read_text() == (
        corpus_dir / "data-bin" / "dict.txt"
    ).read_text()
    d = Dictionary.load(str(out / "data-bin" / "dict.txt"))
    for split in ("train", "valid"):
        ds = {
            n: data_utils.load_indexed_dataset(str(out / "data-bin" / f"{split}.{n}"), None)
            for n in cline.SPLIT_FILES
        }
        assert len({len(x) for x in ds.values()}) == 1
        assert np.array_equal(ds["syn"].sizes, ds["syn_label"].sizes)
        assert np.array_equal(ds["ant"].sizes, ds["ant_label"].sizes)
        text_labels = [
            list(map(int, line.split()))
            for line in (out / "tok" / f"{split}.syn_label").read_text().splitlines()
        ]
        for i in range(len(text_labels)):
            assert ds["syn_label"][i].tolist() == text_labels[i] + [0]
        assert d.string(ds["ori"][0]) == (out / "tok" / f"{split}.ori").read_text().splitlines()[0]
    lines = (out / "tok" / "train.ori").read_text().splitlines()
    assert (out / "tok" / "train.ant").read_text().splitlines()[-2:] == lines[
        -2:
    ]  # no eligible word: unchanged

    # the same seed gives the same bytes with 2 worker processes; another seed differs
    settings = cline.Settings(
        seed=5, tokenizer=TokenizerSpec("sentencepiece", spm_model=str(corpus_dir / "spm.model"))
    )
    splits = {"train": work / "train.txt", "valid": work / "valid.txt"}
    cline.make_cline_data(
        splits, tmp_path / "w2", settings, srcdict=corpus_dir / "data-bin" / "dict.txt", workers=2
    )
    for n in cline.SPLIT_FILES:
        assert (tmp_path / "w2" / "data-bin" / f"train.{n}.bin").read_bytes() == (
            out / "data-bin" / f"train.{n}.bin"
        ).read_bytes()
    settings.seed = 6
    cline.make_cline_data(
        splits, tmp_path / "s6", settings, srcdict=corpus_dir / "data-bin" / "dict.txt", wn=wn
    )
    assert (tmp_path / "s6" / "data-bin" / "train.syn.bin").read_bytes() != (
        out / "data-bin" / "train.syn.bin"
    ).read_bytes()


def test_cli_and_its_bad_inputs(corpus_dir, tmp_path):
    out = tmp_path / "cli"
    src = tmp_path / "s.txt"
    src.write_text("\n".join(tiny_corpus_lines(120, seed=9)) + "\n")
    proc = run_script(
        "make_cline_data.py",
        [
            "--input",
            str(src),
            "--valid-fraction",
            "0.1",
            "--output-dir",
            str(out),
            "--spm-model",
            str(corpus_dir / "spm.model"),
        ],
    )
    assert proc.returncode == 0, proc.stderr
    assert "x_syn replaced" in proc.stdout and "without any antonym" in proc.stdout
    assert (out / "data-bin" / "valid.ant_label.bin").is_file()
    # a dictionary built from the triples themselves knows every piece
    assert json.loads((out / "cline_summary.json").read_text())["train"]["unknown_tokens"] == 0
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    bad = run_script(
        "make_cline_data.py",
        [
            "--train",
            str(empty),
            "--output-dir",
            str(tmp_path / "x"),
            "--spm-model",
            str(corpus_dir / "spm.model"),
        ],
    )
    assert bad.returncode != 0 and "no text" in bad.stderr
    bad = run_script(
        "make_cline_data.py",
        [
            "--train",
            str(src),
            "--output-dir",
            str(tmp_path / "x"),
            "--spm-model",
            str(tmp_path / "no.model"),
        ],
    )
    assert bad.returncode != 0 and "--spm-model" in bad.stderr and "not found" in bad.stderr
    assert not (tmp_path / "x" / "data-bin").exists()


# ---- loss terms ---------------------------------------------------------------------------------


def test_contrastive_loss_hand_computation_and_stability():
    from truneg_fairseq.criterions.cline import contrastive_loss

    h_o = torch.tensor([[1.0, 2.0], [0.5, -1.0]])
    h_s = torch.tensor([[0.5, 0.5], [1.0, 0.0]])
    h_a = torch.tensor([[1.0, -1.0], [0.0, 1.0]])
    want = []
    for o, s, a in zip(h_o.tolist(), h_s.tolist(), h_a.tolist()):
        ps, pa = sum(x * y for x, y in zip(o, s)), sum(x * y for x, y in zip(o, a))
        want.append(-math.log(math.exp(ps) / (math.exp(ps) + math.exp(pa))))
    assert torch.allclose(contrastive_loss(h_o, h_s, h_a), torch.tensor(want), atol=1e-6)
    # dot products of 1e4-1e6: the naive form overflows, this one stays exact
    big = torch.full((2, 768), 30.0)
    far = contrastive_loss(big, big, -big)  # h_o.h_a - h_o.h_s = -1.38e6
    assert torch.isfinite(far).all() and far.max() == 0
    near = contrastive_loss(big, -big, big)
    assert torch.isfinite(near).all() and torch.allclose(near, torch.full((2,), 2 * 768 * 900.0))
    h = torch.randn(4, 16, dtype=torch.float16) * 100
    h.requires_grad_(True)
    contrastive_loss(h, h.flip(0), -h).sum().backward()
    assert torch.isfinite(h.grad).all()


@pytest.fixture(scope="module")
def components(cline_dir):
    work, _ = cline_dir
    return build_components(
        work / "out" / "data-bin", ["--criterion", "cline"], arch_args=TINY_CLINE, task="cline"
    )


def test_batch_keeps_triples_together(components):
    task, _, _ = components
    b = valid_batch(task, 6)
    c = b["cline"]
    assert (
        b["net_input"]["src_tokens"].shape
        == c["syn_tokens"].shape
        == c["ant_tokens"].shape
        == c["syn_labels"].shape
    )
    assert (b["net_input"]["src_tokens"][:, 0] == task.source_dictionary.bos()).all()
    assert b["target"].ne(task.source_dictionary.pad()).any()
    assert c["has_negative"].all()
    assert task.dataset("valid").num_tokens(0) == 3 * task.dataset("valid").size(0)


def _run(crit, model, batch):
    loss, n, log = crit(model, batch)
    return loss, n, log


def test_sharding_invariant_and_every_parameter_trained(components):
    task, model, crit = components
    model.eval()  # no dropout: halves and whole see the same network
    b = valid_batch(task, 8)
    idx = b["id"]
    ds = task.dataset("valid")
    halves = [
        ds.collater([ds[int(i)] for i in idx[:4]]),
        ds.collater([ds[int(i)] for i in idx[4:]]),
    ]
    full = _run(crit, model, ds.collater([ds[int(i)] for i in idx]))
    parts = [_run(crit, model, h) for h in halves]
    assert torch.allclose(full[0], parts[0][0] + parts[1][0], rtol=1e-4)
    assert int(full[1]) == int(parts[0][1]) + int(parts[1][1])
    for k, v in full[2].items():
        assert torch.allclose(
            torch.as_tensor(v, dtype=torch.float),
            torch.as_tensor(parts[0][2][k] + parts[1][2][k], dtype=torch.float),
            rtol=1e-4,
        ), k
    assert crit.logging_outputs_can_be_summed()
    model.train()
    model.zero_grad()
    full = _run(crit, model, ds.collater([ds[int(i)] for i in idx]))
    full[0].backward()
    assert [n for n, p in model.named_parameters() if p.grad is None] == []


def test_terms_and_weights(components, cline_dir):
    task, model, crit = components
    model.eval()
    b = valid_batch(task, 8)
    _, n, log = _run(crit, model, b)
    mp = task.cfg.mask_prob
    with torch.no_grad():
        toks = torch.cat(
            [b["net_input"]["src_tokens"], b["cline"]["syn_tokens"], b["cline"]["ant_tokens"]]
        )
        cls = model.cline_forward(toks, 8, b["target"].ne(1))["cls"]
    from truneg_fairseq.criterions.cline import contrastive_loss

    lens = b["net_input"]["src_tokens"].ne(1).sum(1).float()
    cts = (contrastive_loss(cls[:8], cls[8:16], cls[16:]) * lens * mp).sum()
    assert torch.allclose(log["cts_loss"], cts, rtol=1e-5)
    assert torch.allclose(log["rtd_loss"], mp * log["rtd_bce_sum"], rtol=1e-6)
    # the logged terms, all in the loss's unit, add up to it
    expect = log["mlm_loss"] + log["rtd_loss"] + log["cts_loss"]
    assert torch.allclose(log["loss"], expect, rtol=1e-5)
    # learned weights: exp(-s) * term + s * sample_size, with s the model's log-variances
    work, _ = cline_dir
    t2, m2, c2 = build_components(
        work / "out" / "data-bin",
        ["--criterion", "cline", "--cline-learned-weights"],
        arch_args=TINY_CLINE,
        task="cline",
    )
    m2.eval()
    with torch.no_grad():
        m2.cline_log_vars.copy_(torch.tensor([0.5, -1.0, 2.0]))
    b2 = valid_batch(t2, 8)
    loss2, n2, log2 = _run(c2, m2, b2)
    assert "w_rtd" in log2 and torch.allclose(log2["w_rtd"], torch.tensor(math.e))
    expect2 = (
        sum(log2[f"w_{t}"] * log2[f"{t}_loss"] for t in ("mlm", "rtd", "cts")) + log2["logvar_loss"]
    )
    assert torch.allclose(log2["loss"], expect2, rtol=1e-5)
    assert torch.allclose(log2["logvar_loss"], torch.tensor(1.5) * log2["sample_size"], rtol=1e-6)
    fixed = build_components(
        work / "out" / "data-bin",
        [
            "--criterion",
            "cline",
            "--cline-mlm-weight",
            "0",
            "--cline-rtd-weight",
            "0",
            "--cline-cts-weight",
            "0",
        ],
        arch_args=TINY_CLINE,
        task="cline",
    )
    assert fixed[2].weights == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="drop --cline-mlm/rtd/cts-weight"):
        build_components(
            work / "out" / "data-bin",
            ["--criterion", "cline", "--cline-learned-weights", "--cline-rtd-weight", "2"],
            arch_args=TINY_CLINE,
            task="cline",
        )


# ---- bad input ----------------------------------------------------------------------------------


def test_criterion_with_another_task_and_task_with_another_model(data_bin, cline_dir):
    from fairseq_runs import TINY_ROBERTA

    with pytest.raises(ValueError, match="--criterion cline needs --task cline"):
        build_components(data_bin, ["--criterion", "cline"])
    work, _ = cline_dir
    with pytest.raises(ValueError, match="--task cline needs a CLINE model"):
        build_components(
            work / "out" / "data-bin",
            ["--criterion", "cline"],
            arch_args=TINY_ROBERTA,
            task="cline",
        )


def test_misaligned_files_and_other_dictionary(cline_dir, tmp_path):
    work, _ = cline_dir
    bad = tmp_path / "bad"
    shutil.copytree(work / "out" / "data-bin", bad)
    for ext in ("bin", "idx"):  # valid.ant taken from train: another line count
        shutil.copy(bad / f"train.ant.{ext}", bad / f"valid.ant.{ext}")
    task, _, _ = build_components(bad, ["--criterion", "cline"], arch_args=TINY_CLINE, task="cline")
    with pytest.raises(ValueError, match="misaligned CLINE triple files"):
        task.load_dataset("valid")
    other = tmp_path / "other"
    shutil.copytree(work / "out" / "data-bin", other)
    lines = (other / "dict.txt").read_text().splitlines()
    (other / "dict.txt").write_text("\n".join([lines[1], lines[0]] + lines[2:]) + "\n")
    task, _, _ = build_components(
        other, ["--criterion", "cline"], arch_args=TINY_CLINE, task="cline"
    )
    with pytest.raises(ValueError, match="is not the dictionary the triples"):
        task.load_dataset("valid")


def test_checkpoint_with_another_dictionary_is_refused(components):
    _, model, _ = components
    state = {k: v.clone() for k, v in model.state_dict().items()}
    key = "encoder.sentence_encoder.embed_tokens.weight"
    state[key] = torch.zeros(state[key].size(0) + 8, state[key].size(1))
    with pytest.raises(ValueError, match="binarized against another dictionary"):
        model.upgrade_state_dict_named(state, "")
    # a RoBERTa checkpoint without the CLINE tensors: they start fresh
    state = {
        k: v.clone()
        for k, v in model.state_dict().items()
        if not k.startswith(("rtd_head.", "cline_log_vars"))
    }
    model.upgrade_state_dict_named(state, "")
    assert "rtd_head.out_proj.weight" in state and "cline_log_vars" in state


# ---- Hits -------------------------------------------------------------------------------------


def test_similarities_and_hits_on_known_triplets(components, corpus_dir, lex):
    from truneg_fairseq.data import cline_data as cline
    from truneg_fairseq.evaluation import hits as hits_eval

    task, model, _ = components
    x = torch.randn(2, 5, 8)
    m = torch.ones(2, 5, dtype=torch.bool)
    sims = hits_eval.sentence_similarities(x, x, m, m)
    for v in sims.values():
        assert torch.allclose(v, torch.ones(2), atol=1e-5)
    enc = cline.PieceEncoder(TokenizerSpec("sentencepiece", spm_model=corpus_dir / "spm.model"))
    sents = [
        "the farmer will stay at home .",
        "the main road of the pilot is the big river .",
        "the small lake is quick .",
    ]
    other = [
        "a child chose to remain near the small lake .",
        "my friend is little .",
        "the teacher had to stay in the town .",
    ]
    # syn identical to ori, ant a different sentence: every method wins on every layer past the
    # embeddings' <s> (identical there, a tie, which is not a hit)
    res = hits_eval.hits(
        model, task.source_dictionary, enc, [(s, s, o) for s, o in zip(sents, other)]
    )
    assert res["mean"] == [100.0] * 3 and res["bertscore"] == [100.0] * 3
    assert res["cls"][0] == 0.0 and res["cls"][1:] == [100.0, 100.0]
    rev = hits_eval.hits(
        model, task.source_dictionary, enc, [(s, o, s) for s, o in zip(sents, other)]
    )
    assert all(v == 0.0 for vs in rev.values() for v in vs)
    trip, skipped = cline.make_hits_triplets(["the primary reason is quick .", "it is 42 ."], lex)
    assert skipped == 1 and len(trip) == 1
    o, s, a = trip[0]
    diff_s = [(x, y) for x, y in zip(o.split(), s.split()) if x != y]
    diff_a = [(x, y) for x, y in zip(o.split(), a.split()) if x != y]
    assert len(diff_s) == len(diff_a) == 1 and diff_s[0][0] == diff_a[0][0]
    w = diff_s[0][0]
    pos, base = lex.pos_and_base(w)
    assert diff_s[0][1] in lex.synonyms(w, pos, base) and diff_a[0][1] in lex.antonyms(w, pos, base)


def test_cline_on_the_plugin_bert(cline_dir):
    """cline_bert_hf_*: the same heads and pass on the plugin's BERT (BERT's LayerNorm epsilon,
    the segment offsets kept); every parameter trained; a plain BERT checkpoint loads with the
    CLINE tensors starting fresh, and a sentence_prediction build drops them."""
    from truneg_fairseq.models.bert import BertModel
    from truneg_fairseq.models.cline import ClineBertModel

    work, _ = cline_dir
    bert_args = ["--arch", "cline_bert_hf_tiny", "--tokens-per-sample", "64"]
    task, model, crit = build_components(
        work / "out" / "data-bin", ["--criterion", "cline"], arch_args=bert_args, task="cline"
    )
    assert isinstance(model, ClineBertModel) and isinstance(model, BertModel)
    assert {m.eps for m in model.modules() if "LayerNorm" in type(m).__name__} == {1e-12}
    model.train()
    loss, _, log = crit(model, valid_batch(task, 4))
    loss.backward()
    assert [n for n, p in model.named_parameters() if p.grad is None] == []
    assert float(log["cts_pairs"]) > 0
    plain = {
        k: v
        for k, v in model.state_dict().items()
        if not k.startswith(("rtd_head.", "cline_log_vars"))
    }
    _, fresh, _ = build_components(
        work / "out" / "data-bin",
        ["--criterion", "cline"],
        arch_args=bert_args,
        task="cline",
        seed=9,
    )
    head = fresh.rtd_head.dense.weight.clone()
    fresh.load_state_dict(plain, strict=True)
    assert torch.equal(fresh.rtd_head.dense.weight, head)
    assert torch.equal(
        fresh.encoder.sentence_encoder.embed_tokens.weight,
        plain["encoder.sentence_encoder.embed_tokens.weight"],
    )


def test_cline_on_the_plugin_electra(cline_dir, corpus_dir):
    """cline_electra_*: MLM from the generator, RTD from the discriminator's own head, <s> from
    the discriminator reading x_ori unmasked; every parameter trained; exact under sharding; a
    plain ELECTRA checkpoint continues (log-variances fresh), another vocabulary is refused, a
    discriminator-only build drops the generator and the log-variances; Hits reads its layers."""
    from truneg_fairseq.data import cline_data as cline
    from truneg_fairseq.evaluation import hits as hits_eval
    from truneg_fairseq.models.cline import ClineElectraModel
    from truneg_fairseq.models.electra import ElectraModel

    work, _ = cline_dir
    data = work / "out" / "data-bin"
    args = ["--arch", "cline_electra_tiny", "--tokens-per-sample", "64"]
    task, model, crit = build_components(
        data, ["--criterion", "cline"], arch_args=args, task="cline"
    )
    assert isinstance(model, ClineElectraModel) and model.generator is not None
    assert not hasattr(model, "rtd_head") and model.cline_log_vars.shape == (3,)

    model.eval()
    b = valid_batch(task, 8)
    ori, target = b["net_input"]["src_tokens"], b["target"]
    masked = target.ne(task.source_dictionary.pad())
    toks = torch.cat([ori, b["cline"]["syn_tokens"], b["cline"]["ant_tokens"]])
    with torch.no_grad():
        net = model.cline_forward(toks, 8, masked, target)
        mlm, rtd, cls = net["mlm_logits"], net["rtd_logits"], net["cls"]
        clean = torch.where(masked, target, ori)
        assert not torch.equal(clean, ori)
        assert torch.allclose(cls[:8], model.discriminator_features(clean)[:, 0], atol=1e-6)
        assert torch.allclose(cls[8:], model.discriminator_features(toks[8:])[:, 0], atol=1e-6)
        assert torch.allclose(rtd, model.discriminator_logits(toks[8:]), atol=1e-6)
        assert torch.allclose(mlm, model.generator_logits(ori, masked), atol=1e-6)
        assert mlm.shape == (int(masked.sum()), len(task.source_dictionary))

    # the criterion: sums over shards equal the whole batch; every parameter gets a gradient
    ds = task.dataset("valid")
    items = [ds[int(i)] for i in b["id"]]
    full = crit(model, ds.collater(items))
    parts = [crit(model, ds.collater(items[:4])), crit(model, ds.collater(items[4:]))]
    assert torch.allclose(full[0], parts[0][0] + parts[1][0], rtol=1e-4)
    for k in ("mlm_loss", "rtd_loss", "cts_loss", "cts_pairs", "sample_size"):
        assert torch.allclose(
            torch.as_tensor(full[2][k], dtype=torch.float),
            torch.as_tensor(parts[0][2][k] + parts[1][2][k], dtype=torch.float),
            rtol=1e-4,
        ), k
    model.train()
    model.zero_grad()
    crit(model, ds.collater(items))[0].backward()
    assert [n for n, p in model.named_parameters() if p.grad is None] == []

    # a plain ELECTRA pre-training checkpoint continues with CLINE
    plain = {k: v.clone() for k, v in model.state_dict().items() if k != "cline_log_vars"}
    _, fresh, _ = build_components(
        data, ["--criterion", "cline"], arch_args=args, task="cline", seed=9
    )
    with torch.no_grad():
        fresh.cline_log_vars.fill_(0.7)
    fresh.load_state_dict(plain, strict=True)
    assert torch.equal(fresh.cline_log_vars.detach(), torch.zeros(3))
    assert torch.equal(fresh.generator_bias, plain["generator_bias"])
    bad = dict(plain)
    bad["embeddings.embed_tokens.weight"] = torch.zeros(
        bad["embeddings.embed_tokens.weight"].size(0) + 8, 16
    )
    with pytest.raises(ValueError, match="binarized against another dictionary"):
        fresh.upgrade_state_dict_named(bad, "")
    # fine-tuning builds the discriminator alone (electra_* or cline_electra_*): CLINE's
    # log-variances and the generator are dropped on load
    disc = ElectraModel(model.cfg, task.source_dictionary)
    disc.load_state_dict(model.state_dict(), strict=True)
    assert torch.equal(
        disc.discriminator_head.out_proj.weight, model.discriminator_head.out_proj.weight
    )
    with pytest.raises(ValueError, match="drop --electra-discriminator-only"):
        build_components(
            data,
            ["--criterion", "cline"],
            arch_args=[*args, "--electra-discriminator-only"],
            task="cline",
        )

    # Hits on the discriminator's layers (embeddings + 2)
    model.eval()
    enc = cline.PieceEncoder(TokenizerSpec("sentencepiece", spm_model=corpus_dir / "spm.model"))
    sents = ["the farmer will stay at home .", "the main road of the pilot is the big river ."]
    other = ["a child chose to remain near the small lake .", "my friend is little ."]
    res = hits_eval.hits(
        model, task.source_dictionary, enc, [(s, s, o) for s, o in zip(sents, other)]
    )
    assert res["mean"] == [100.0] * 3 and res["bertscore"] == [100.0] * 3
