"""A RoBERTa export is a directory transformers and truneg-hf-train use as it is: a tiny RoBERTa
of the tiny sentencepiece corpus (its data directory's tokenizer_fingerprint.json naming
spm.model) exported with a fast tokenizer whose ids are the plugin's own on every corpus line;
the fill-mask pipeline runs on it and truneg-hf-train continues it; an export whose tokenizer
cannot be written is one error naming the flags or the file. An ELECTRA pre-trained on the same
sentencepiece data exports the same way: the same tokenizer beside its discriminator and its
generator, the same logits, the fill-mask pipeline on its generator. An imported BERT whose
directory does not say whether it lower-cases exports a cased vocabulary as cased."""

import json
import shutil

import pytest
import torch
from command_runs import run_script
from fairseq_runs import TINY_ELECTRA, TINY_ROBERTA, build_components, valid_batch
from hf_fixtures import save_bert, wordpiece_vocab

from truneg_fairseq.convert import hf as hf_convert
from truneg_fairseq.convert.build import save_fresh_checkpoint
from truneg_fairseq.convert.hf import ConversionError


def _cfg_of(data, arch_args, task="masked_lm"):
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_training_parser()
    ns = options.parse_args_and_arch(parser, [str(data), "--task", task, "--cpu", *arch_args])
    return convert_namespace_to_omegaconf(ns)


def _spm_checkpoint(root, corpus_dir, data_bin, name, arch_args, criterion, task="masked_lm"):
    """A tiny checkpoint of ``arch_args`` whose data directory records the sentencepiece model
    (as prepare_corpus.py writes it), and the model's copy of spm.model there."""
    from truneg_fairseq.text import TokenizerSpec, build_tokenizer, write_record

    data = root / "data-bin"
    shutil.copytree(data_bin, data)
    shutil.copyfile(corpus_dir / "spm.model", root / "spm.model")
    spec = TokenizerSpec("sentencepiece", spm_model=str(root / "spm.model"))
    write_record(data, build_tokenizer(spec))
    task_obj, model, _ = build_components(
        data, ["--criterion", criterion], arch_args=arch_args, task=task
    )
    model.eval()
    ckpt = root / name
    save_fresh_checkpoint(ckpt, _cfg_of(data, arch_args, task), model)
    return {"root": root, "ckpt": ckpt, "task": task_obj, "model": model, "data": data}


@pytest.fixture(scope="module")
def roberta(tmp_path_factory, corpus_dir, data_bin):
    root = tmp_path_factory.mktemp("roberta_export")
    return _spm_checkpoint(root, corpus_dir, data_bin, "rob.pt", TINY_ROBERTA, "masked_lm")


@pytest.fixture(scope="module")
def electra(tmp_path_factory, corpus_dir, data_bin):
    root = tmp_path_factory.mktemp("electra_export")
    return _spm_checkpoint(
        root, corpus_dir, data_bin, "electra.pt", TINY_ELECTRA, "electra", task="electra"
    )


@pytest.fixture(scope="module")
def exported(roberta):
    out = roberta["root"] / "hf"
    assert hf_convert.export_hf(roberta["ckpt"], out) == ["RobertaForMaskedLM"]
    return out


def corpus_lines(corpus_dir):
    return [
        line
        for split in ("train", "valid")
        for line in (corpus_dir / "raw" / f"{split}.txt").read_text().splitlines()
    ]


def test_the_exported_tokenizer_gives_the_plugins_ids_on_every_line(exported, roberta, corpus_dir):
    from transformers import AutoTokenizer

    from truneg_fairseq.text import TokenizerSpec, build_tokenizer

    d = roberta["task"].source_dictionary
    plugin = build_tokenizer(
        TokenizerSpec("sentencepiece", spm_model=str(corpus_dir / "spm.model"))
    )
    tok = AutoTokenizer.from_pretrained(str(exported), local_files_only=True)
    assert (tok.bos_token_id, tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2, 3)
    assert tok.mask_token == "<mask>" and tok.mask_token_id == d.index("<mask>") == len(d) - 1
    lines = corpus_lines(corpus_dir) + ["  The   why \t ÿÿ q.", "Ｔｈｅ big house"]
    unseen = 0
    for line in lines:
        want = plugin.encode_ids(line, d)
        got = tok(line)["input_ids"]
        assert got[0] == d.bos() and got[-1] == d.eos(), line  # <s> pieces </s>, as fairseq's data
        # a piece the dictionary lacks has a row of its own after the dictionary's: <unk> to fairseq
        assert [i if i < len(d) else d.unk() for i in got[1:-1]] == want, line
        unseen += any(i >= len(d) for i in got)
    assert unseen  # the BPE's intermediate pieces ('h', 'y', ...) occur in the extra lines
    assert tok.model_max_length == 64  # the position table's size


def test_the_export_predicts_as_the_checkpoint(exported, roberta):
    """The rows added for pieces the dictionary lacks copy <unk>'s embedding and are never
    predicted: the logits over the dictionary's rows are the checkpoint's."""
    from transformers import RobertaForMaskedLM

    d = roberta["task"].source_dictionary
    hf = RobertaForMaskedLM.from_pretrained(str(exported)).eval()
    emb = hf.roberta.embeddings.word_embeddings.weight
    assert emb.size(0) > len(d) and torch.equal(
        emb[len(d) :], emb[d.unk()].expand_as(emb[len(d) :])
    )
    ids = valid_batch(roberta["task"])["net_input"]["src_tokens"][:3]
    mask = ids.ne(d.pad())
    with torch.no_grad():
        ref, _ = roberta["model"](ids)
        got = hf(input_ids=ids, attention_mask=mask.long()).logits
        probs = got.softmax(-1)
    assert (ref - got[..., : len(d)])[mask].abs().max() <= 1e-4
    assert probs[..., len(d) :].max() == 0


def test_fill_mask_pipeline_loads_the_export_and_runs(exported):
    from transformers import pipeline

    fill = pipeline("fill-mask", model=str(exported), device="cpu")
    out = fill("the big <mask> is in the town .", top_k=3)
    assert len(out) == 3 and all("<mask>" not in o["sequence"] for o in out)


def test_an_electra_of_sentencepiece_data_exports_as_a_roberta_does(electra, corpus_dir, tmp_path):
    """An ELECTRA pre-trained on the sentencepiece data: discriminator and generator load with
    transformers, each with the fast tokenizer whose ids are the dictionary's rows; their logits
    over the dictionary's rows are the checkpoint's, the rows of pieces the dictionary lacks copy
    <unk>'s and are never predicted, and the fill-mask pipeline runs on the generator."""
    from transformers import AutoTokenizer, ElectraForMaskedLM, ElectraForPreTraining, pipeline

    from truneg_fairseq.text import TokenizerSpec, build_tokenizer

    out = tmp_path / "hf"
    written = hf_convert.export_hf(electra["ckpt"], out)
    assert written == ["ElectraForPreTraining", "ElectraForMaskedLM (generator/)"]
    d, model = electra["task"].source_dictionary, electra["model"]
    plugin = build_tokenizer(
        TokenizerSpec("sentencepiece", spm_model=str(corpus_dir / "spm.model"))
    )
    for where in (out, out / "generator"):
        assert not (where / "vocab.txt").exists()  # no WordPiece vocabulary over these pieces
        tok = AutoTokenizer.from_pretrained(str(where), local_files_only=True)
        assert (tok.bos_token_id, tok.pad_token_id, tok.eos_token_id) == (0, 1, 2)
        assert tok.mask_token_id == d.index("<mask>") and tok.model_max_length == 64
        for line in corpus_lines(corpus_dir)[:50] + ["  The   why \t ÿÿ q."]:
            got = tok(line)["input_ids"]
            assert got[0] == d.bos() and got[-1] == d.eos(), line
            assert [i if i < len(d) else d.unk() for i in got[1:-1]] == plugin.encode_ids(line, d)
    disc = ElectraForPreTraining.from_pretrained(str(out)).eval()
    gen = ElectraForMaskedLM.from_pretrained(str(out / "generator")).eval()
    emb = disc.electra.embeddings.word_embeddings.weight
    assert emb.size(0) > len(d)
    assert torch.equal(emb[len(d) :], emb[d.unk()].expand_as(emb[len(d) :]))
    ids = valid_batch(electra["task"])["net_input"]["src_tokens"][:3]
    mask = ids.ne(d.pad())
    with torch.no_grad():
        ref_disc = model.discriminator_logits(ids)
        ref_gen = model.generator_logits(ids)
        got_disc = disc(input_ids=ids, attention_mask=mask.long()).logits
        got_gen = gen(input_ids=ids, attention_mask=mask.long()).logits
    assert (ref_disc.view_as(got_disc) - got_disc)[mask].abs().max() <= 1e-4
    assert (ref_gen - got_gen[..., : len(d)])[mask].abs().max() <= 1e-4
    assert got_gen.softmax(-1)[..., len(d) :].max() == 0
    fill = pipeline("fill-mask", model=str(out / "generator"), device="cpu")
    filled = fill("the big <mask> is in the town .", top_k=3)
    assert len(filled) == 3 and all("<mask>" not in f["sequence"] for f in filled)


def test_an_electra_of_sentencepiece_data_without_a_record_names_the_flags(electra, tmp_path):
    """Its data directory without the tokenizer record: one error naming --spm-model and
    --no-tokenizer, nothing written; given --spm-model it exports, and --vocab (WordPiece ids)
    is refused."""
    data = tmp_path / "data"
    shutil.copytree(electra["data"], data)
    (data / "tokenizer_fingerprint.json").unlink()
    with pytest.raises(
        ConversionError, match=r"ELECTRA checkpoint's data.*--spm-model FILE.*--no-tokenizer"
    ):
        hf_convert.export_hf(electra["ckpt"], tmp_path / "out", data=str(data))
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConversionError, match=r"--vocab is for models of WordPiece data"):
        hf_convert.export_hf(
            electra["ckpt"], tmp_path / "out", data=str(data), vocab_file=data / "dict.txt"
        )
    spm = electra["root"] / "spm.model"
    hf_convert.export_hf(electra["ckpt"], tmp_path / "out", data=str(data), spm_model=spm)
    assert (tmp_path / "out" / "generator" / "tokenizer.json").is_file()


@pytest.mark.slow
def test_truneg_hf_train_continues_the_export(exported, corpus_dir, tmp_path, capsys):
    from transformers import RobertaForMaskedLM

    from truneg_fairseq.cli import hf_train

    text = tmp_path / "text.txt"
    text.write_text("\n".join(corpus_lines(corpus_dir)[:64]) + "\n")
    out = tmp_path / "run"
    argv = [str(exported), "--train", str(text), "--output-dir", str(out), "--cpu",
            "--objective", "hard_correction", "--max-steps", "3", "--batch-size", "4", "--seq-len", "32",
            "--save-steps", "100", "--log-steps", "1", "--report-to", "none"]  # fmt: skip
    assert hf_train.main(argv) == 0
    log = capsys.readouterr().out
    assert "num_updates 3" in log and "pred_corr_ratio" in log  # the tokenizer's synonym table
    assert (out / "synonyms.npz").is_file()
    RobertaForMaskedLM.from_pretrained(str(out))


def test_cli_writes_the_tokenizer_and_no_tokenizer_writes_dict_txt_alone(roberta, tmp_path):
    ok = run_script("convert_hf.py", ["export", str(roberta["ckpt"]), str(tmp_path / "a")])
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert {"tokenizer.json", "tokenizer_config.json", "dict.txt"} <= {
        p.name for p in (tmp_path / "a").iterdir()
    }
    hf_convert.export_hf(roberta["ckpt"], tmp_path / "b", tokenizer=False)
    assert not (tmp_path / "b" / "tokenizer.json").exists()
    assert (tmp_path / "b" / "dict.txt").is_file()
    conf = json.loads((tmp_path / "b" / "config.json").read_text())
    assert conf["vocab_size"] == len(roberta["task"].source_dictionary)


def _moved(roberta, tmp_path, record=True):
    """The checkpoint with its data directory elsewhere (and without its record)."""
    data = tmp_path / "data"
    shutil.copytree(roberta["data"], data)
    if not record:
        (data / "tokenizer_fingerprint.json").unlink()
    return data


def test_a_sentencepiece_record_whose_model_is_gone_is_one_error(roberta, tmp_path, corpus_dir):
    data = _moved(roberta, tmp_path)
    rec = json.loads((data / "tokenizer_fingerprint.json").read_text())
    rec["files"]["spm_model"]["path"] = str(tmp_path / "gone.model")
    (data / "tokenizer_fingerprint.json").write_text(json.dumps(rec))
    with pytest.raises(ConversionError, match=r"gone\.model, which is gone.*--spm-model FILE"):
        hf_convert.export_hf(roberta["ckpt"], tmp_path / "out", data=str(data))
    assert not (tmp_path / "out").exists()
    # a model other than the recorded one is refused; the recorded one, moved, gives it back
    from truneg_fairseq.data import corpus_steps

    other = corpus_steps.train_sentencepiece(
        corpus_dir / "raw" / "train.txt", tmp_path / "other", vocab_size=120, model_type="bpe"
    )
    with pytest.raises(
        ConversionError, match=r"--spm-model .*other\.model is not the file that made"
    ):
        hf_convert.export_hf(roberta["ckpt"], tmp_path / "out", data=str(data), spm_model=other)
    assert not (tmp_path / "out").exists()
    hf_convert.export_hf(
        roberta["ckpt"], tmp_path / "out", data=str(data), spm_model=roberta["root"] / "spm.model"
    )
    assert (tmp_path / "out" / "tokenizer.json").is_file()


def test_without_a_record_the_flags_are_named(roberta, tmp_path, corpus_dir):
    data = _moved(roberta, tmp_path, record=False)
    with pytest.raises(
        ConversionError, match=r"--spm-model FILE \(the sentencepiece model.*--no-tokenizer"
    ):
        hf_convert.export_hf(roberta["ckpt"], tmp_path / "out", data=str(data))
    assert not (tmp_path / "out").exists()
    bad = run_script(
        "convert_hf.py",
        ["export", str(roberta["ckpt"]), str(tmp_path / "out"), "--data", str(data)],
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "--spm-model FILE" in bad.stderr and "--no-tokenizer" in bad.stderr


def test_a_gpt2_roberta_exports_its_bpe_and_without_its_files_is_one_error(tmp_path):
    """A RoBERTa on GPT-2 BPE ids (a toy byte-level BPE, the dictionary made from the text, so
    most byte pieces are missing from it): the export's vocab.json + merges.txt give the plugin's
    ids on every line; without the record the export asks for the BPE files."""
    from corpus_fixtures import tiny_corpus_lines, write_toy_gpt2_bpe
    from transformers import AutoTokenizer

    from truneg_fairseq.data import corpus_steps
    from truneg_fairseq.text import TokenizerSpec, build_tokenizer, write_record

    bpe = write_toy_gpt2_bpe(tmp_path / "bpe")
    spec = TokenizerSpec(
        "gpt2", gpt2_encoder_json=str(bpe / "encoder.json"), gpt2_vocab_bpe=str(bpe / "vocab.bpe")
    )
    plugin = build_tokenizer(spec)
    lines = tiny_corpus_lines(120, seed=5)
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "train.txt").write_text("\n".join(plugin.encode_lines(lines[:100])) + "\n")
    (raw / "valid.txt").write_text("\n".join(plugin.encode_lines(lines[100:])) + "\n")
    data = corpus_steps.binarize(raw / "train.txt", raw / "valid.txt", tmp_path / "data-bin")
    write_record(data, plugin)
    task, model, _ = build_components(data, ["--criterion", "masked_lm"], arch_args=TINY_ROBERTA)
    save_fresh_checkpoint(tmp_path / "rob.pt", _cfg_of(data, TINY_ROBERTA), model)
    hf_convert.export_hf(tmp_path / "rob.pt", tmp_path / "hf")
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "hf"), local_files_only=True)
    d = task.source_dictionary
    assert tok.mask_token_id == d.index("<mask>")
    for line in lines + ["Why 99 zebras?"]:
        got = tok(line)["input_ids"]
        assert got[0] == d.bos() and got[-1] == d.eos()
        assert [i if i < len(d) else d.unk() for i in got[1:-1]] == plugin.encode_ids(line, d)
    (data / "tokenizer_fingerprint.json").unlink()
    with pytest.raises(ConversionError, match=r"--gpt2-encoder-json FILE --gpt2-vocab-bpe FILE"):
        hf_convert.export_hf(tmp_path / "rob.pt", tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_offline_recipe_of_the_docs_makes_a_directory_hf_train_continues(
    tmp_path, monkeypatch, capsys
):
    """docs/hf.md's "A model directory, offline" program, run as written on the tiny corpus:
    its directory passes truneg-hf-train's checks and trains."""
    import re
    import runpy

    from corpus_fixtures import tiny_corpus_lines
    from repo_paths import REPO

    from truneg_fairseq.cli import hf_train

    doc = (REPO / "docs" / "hf.md").read_text()
    block = doc.split("<!-- offline model -->\n", 1)[1].split("<!-- end offline model -->", 1)[0]
    code = re.fullmatch(r"```python\n(.*)```\n", block, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus.txt").write_text("\n".join(tiny_corpus_lines(200)) + "\n")
    (tmp_path / "recipe.py").write_text(code)
    runpy.run_path(str(tmp_path / "recipe.py"), run_name="__main__")
    argv = ["my-bert", "--train", "corpus.txt", "--output-dir", "run", "--cpu", "--objective",
            "mlm", "--max-steps", "2", "--seq-len", "32", "--report-to", "none"]  # fmt: skip
    assert hf_train.main(argv) == 0
    assert "num_updates 2" in capsys.readouterr().out


def test_export_of_a_cased_vocabulary_without_tokenizer_config_stays_cased(tmp_path):
    """Imported from a directory that does not say whether it lower-cases: the export follows
    the vocabulary (upper-case entries: cased), as the plugin's own WordPiece does."""
    from transformers import AutoTokenizer

    from truneg_fairseq.convert.hf import export_hf, import_hf

    vocab = wordpiece_vocab() + ["The", "Paris", "P"]
    save_bert(tmp_path / "hf", vocab=vocab)
    for name in ("tokenizer_config.json", "tokenizer.json"):
        (tmp_path / "hf" / name).unlink(missing_ok=True)
    import_hf(tmp_path / "hf", tmp_path / "imp")
    assert json.loads((tmp_path / "imp" / "import.json").read_text())["lowercase"] is None
    export_hf(tmp_path / "imp" / "model.pt", tmp_path / "back")
    assert (
        json.loads((tmp_path / "back" / "tokenizer_config.json").read_text())["do_lower_case"]
        is False
    )
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "back"))
    assert tok.tokenize("The Paris") == ["The", "Paris"]
