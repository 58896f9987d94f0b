"""HuggingFace import/export against real ``transformers`` models: tiny random BERT and ELECTRA
directories saved locally (safetensors and .bin), imported into the plugin's fairseq models,
compared output for output (fp32, <= 1e-4), exported back and loaded with ``from_pretrained``."""

import json
import logging
import shutil

import pytest
import torch
from command_runs import run_script
from fairseq_runs import model_state
from hf_fixtures import padded_batch, save_bert, save_electra_pair, to_fairseq_ids, wordpiece_vocab

from truneg_fairseq.checkpoints import CheckpointError, load_for_inference
from truneg_fairseq.convert import hf as hf_convert
from truneg_fairseq.convert.build import save_fresh_checkpoint
from truneg_fairseq.convert.hf import ConversionError
from truneg_fairseq.outputs import MARKER

TOL = 1e-4


def max_diff(a, b, mask):
    return (a[mask] - b[mask]).abs().max().item()


@pytest.fixture(scope="module")
def vocab():
    return wordpiece_vocab()


@pytest.fixture(scope="module")
def batch(vocab):
    ids, att = padded_batch(vocab)
    return ids, att, att.bool()


@pytest.fixture(scope="module")
def electra_pair(tmp_path_factory, vocab):
    root = tmp_path_factory.mktemp("electra")
    disc, gen = save_electra_pair(root / "disc", root / "gen", vocab=vocab)
    out = hf_convert.import_hf(root / "disc", root / "imported", generator_dir=root / "gen")
    return root, disc, gen, out


def load(path):
    models, _, task = load_for_inference(path)
    assert len(models) == 1 and not any(m.training for m in models[0].modules())  # ready to predict
    return models[0], task


def hf_order(vocab):
    from truneg_fairseq.text import wordpiece_row_order

    return torch.tensor(wordpiece_row_order(vocab))


@pytest.mark.parametrize(
    "cls_name,safe",
    [("BertForMaskedLM", True), ("BertForMaskedLM", False), ("BertForPreTraining", True)],
)
def test_bert_import_matches_transformers(tmp_path, vocab, batch, cls_name, safe):
    hf = save_bert(tmp_path / "hf", cls_name, safe=safe, vocab=vocab)
    assert (tmp_path / "hf" / ("model.safetensors" if safe else "pytorch_model.bin")).is_file()
    out = hf_convert.import_hf(tmp_path / "hf", tmp_path / "out")
    assert sorted(p.name for p in out.iterdir() if p.name != MARKER) == [
        "dict.txt",
        "import.json",
        "model.pt",
        "vocab.txt",
    ]
    model, task = load(out / "model.pt")
    assert type(model).__name__ == "BertModel" and len(task.source_dictionary) == len(vocab)
    ids, att, mask = batch
    fs_ids = to_fairseq_ids(ids, vocab)
    assert fs_ids.eq(task.source_dictionary.pad()).eq(~mask).all()  # [PAD] became fairseq's <pad>
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=att, output_hidden_states=True)
        logits, _ = model(fs_ids)  # B x T x V in fairseq row order
        feats, _ = model(fs_ids, features_only=True)
    ref_logits = ref.logits if cls_name == "BertForMaskedLM" else ref.prediction_logits
    assert max_diff(ref_logits[..., hf_order(vocab)], logits, mask) <= TOL
    assert max_diff(ref.hidden_states[-1], feats, mask) <= TOL


def test_bert_without_head_matches_hidden_states_and_warns(tmp_path, vocab, batch, caplog):
    hf = save_bert(tmp_path / "hf", "BertModel", vocab=vocab)
    with caplog.at_level(logging.WARNING):
        out = hf_convert.import_hf(tmp_path / "hf", tmp_path / "out")
    assert "has no masked-LM head" in caplog.text and "fresh initialisation" in caplog.text
    model, _ = load(out / "model.pt")
    ids, att, mask = batch
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=att).last_hidden_state
        feats, _ = model(to_fairseq_ids(ids, vocab), features_only=True)
    assert max_diff(ref, feats, mask) <= TOL
    head = model.encoder.lm_head
    assert head.weight is model.encoder.sentence_encoder.embed_tokens.weight  # tied to the import
    assert torch.equal(head.bias, torch.zeros_like(head.bias))


def test_dict_txt_maps_specials_and_keeps_hf_order(tmp_path, vocab):
    save_bert(tmp_path / "hf", vocab=vocab)
    out = hf_convert.import_hf(tmp_path / "hf", tmp_path / "out")
    _, task = load(out / "model.pt")
    d = task.source_dictionary
    assert [d[i] for i in range(4)] == ["<s>", "<pad>", "</s>", "<unk>"] and d[
        len(d) - 1
    ] == "<mask>"
    others = [t for t in vocab if t not in ("[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]")]
    assert [d[i] for i in range(4, len(d) - 1)] == others
    assert (out / "vocab.txt").read_text().split("\n")[:-1] == vocab


def test_electra_pair_import_matches_transformers(electra_pair, vocab, batch):
    _, disc, gen, out = electra_pair
    model, _ = load(out / "model.pt")
    assert model.generator is not None
    assert model.generator_head.layer_norm.eps == pytest.approx(1e-12)
    ids, att, mask = batch
    fs_ids = to_fairseq_ids(ids, vocab)
    with torch.no_grad():
        d_ref = disc(input_ids=ids, attention_mask=att, output_hidden_states=True)
        g_ref = gen(input_ids=ids, attention_mask=att, output_hidden_states=True)
        d_logits = model.discriminator_logits(fs_ids)
        g_logits = model.generator_logits(fs_ids)
        d_feats = model.discriminator_features(fs_ids)
        g_feats = model.generator_features(fs_ids)
    assert max_diff(d_ref.logits, d_logits, mask) <= TOL
    assert max_diff(g_ref.logits[..., hf_order(vocab)], g_logits, mask) <= TOL
    assert max_diff(d_ref.hidden_states[-1], d_feats, mask) <= TOL
    assert max_diff(g_ref.hidden_states[-1], g_feats, mask) <= TOL


def test_electra_discriminator_alone(tmp_path, electra_pair, vocab, batch):
    root, disc, _, _ = electra_pair
    out = hf_convert.import_hf(root / "disc", tmp_path / "disc_only")
    model, _ = load(out / "model.pt")
    assert model.generator is None
    ids, att, mask = batch
    with torch.no_grad():
        ref = disc(input_ids=ids, attention_mask=att).logits
        got = model.discriminator_logits(to_fairseq_ids(ids, vocab))
    assert max_diff(ref, got, mask) <= TOL


def test_a_discriminator_alone_loads_for_inference(tmp_path, electra_pair, vocab, batch):
    """The scripts' loader reads an ELECTRA discriminator imported without its generator (its
    task would add one and refuse the model otherwise), moved away from where it was imported:
    dict.txt beside it is found, the model comes back in eval mode, and the export writes the
    discriminator alone."""
    root, disc, _, _ = electra_pair
    hf_convert.import_hf(root / "disc", tmp_path / "imported")
    moved = tmp_path / "moved"
    (tmp_path / "imported").rename(moved)
    models, cfg, task = load_for_inference(moved / "model.pt")
    assert cfg.model.electra_discriminator_only and cfg.task.data == str(moved)
    (model,) = models
    assert type(model).__name__ == "ElectraModel" and model.generator is None
    assert not any(m.training for m in model.modules())
    assert len(task.source_dictionary) == len(vocab)
    ids, att, mask = batch
    with torch.no_grad():
        ref = disc(input_ids=ids, attention_mask=att).logits
        got = model.discriminator_logits(to_fairseq_ids(ids, vocab))
    assert max_diff(ref, got, mask) <= TOL
    with pytest.raises(CheckpointError, match=rf"--data {tmp_path} has no dict.txt"):
        load_for_inference(moved / "model.pt", str(tmp_path))
    assert hf_convert.export_hf(moved / "model.pt", tmp_path / "hf") == ["ElectraForPreTraining"]
    assert not (tmp_path / "hf" / "generator").exists()


def test_a_sentencepiece_record_over_a_wordpiece_electra_is_refused(
    tmp_path, electra_pair, corpus_dir
):
    """A WordPiece ELECTRA whose data directory records a sentencepiece model that did not make
    its dictionary: one error naming the record and the model, nothing written; a WordPiece
    record exports its WordPiece vocabulary as before."""
    from truneg_fairseq.text.spec import RECORD_NAME, RECORD_VERSION

    _, _, _, out = electra_pair
    moved = tmp_path / "spm_trained"
    shutil.copytree(out, moved)
    spm = str(corpus_dir / "spm.model")
    record = {
        "format_version": RECORD_VERSION,
        "tokenizer": "sentencepiece",
        "fingerprint": "x",
        "files": {"spm_model": {"path": spm, "sha256": "0" * 64, "digest": "content"}},
    }
    (moved / RECORD_NAME).write_text(json.dumps(record))
    with pytest.raises(ConversionError, match=r"spm\.model is not the file that made .*dict\.txt"):
        hf_convert.export_hf(moved / "model.pt", tmp_path / "hf", data=str(moved))
    assert not (tmp_path / "hf").exists()
    record.update(tokenizer="wordpiece", files={}, lowercase=True)
    (moved / RECORD_NAME).write_text(json.dumps(record))
    written = hf_convert.export_hf(moved / "model.pt", tmp_path / "hf", data=str(moved))
    assert written[0] == "ElectraForPreTraining"
    assert (tmp_path / "hf" / "vocab.txt").is_file()


def test_a_bert_of_sentencepiece_data_is_refused(tmp_path, vocab, corpus_dir):
    """A BERT export writes a WordPiece tokenizer only: a BERT whose data records sentencepiece
    is one error naming the record and the route, nothing written."""
    from truneg_fairseq.text.spec import RECORD_NAME, RECORD_VERSION

    save_bert(tmp_path / "hf", vocab=vocab)
    out = hf_convert.import_hf(tmp_path / "hf", tmp_path / "imp")
    record = {
        "format_version": RECORD_VERSION,
        "tokenizer": "sentencepiece",
        "fingerprint": "x",
        "files": {"spm_model": {"path": str(corpus_dir / "spm.model"), "sha256": "0" * 64}},
    }
    (out / RECORD_NAME).write_text(json.dumps(record))
    with pytest.raises(ConversionError, match=r"sentencepiece pieces .*--tokenizer wordpiece"):
        hf_convert.export_hf(out / "model.pt", tmp_path / "back")
    assert not (tmp_path / "back").exists()


def test_an_electra_of_sentencepiece_pieces_without_a_record_asks_for_its_model(
    tmp_path, data_bin, corpus_dir
):
    """No tokenizer record beside the data (binarized by hand): the dictionary's sentencepiece
    word-start marks route the export to the data's own tokenizer, whose model it asks for
    (a WordPiece vocabulary would read most words as [UNK]); with --spm-model it exports."""
    from fairseq_runs import TINY_ELECTRA, fairseq_train

    fairseq_train(
        data_bin,
        tmp_path / "ck",
        [*TINY_ELECTRA, "--task", "electra", "--criterion", "electra", "--max-update", "1"],
    )
    ckpt = tmp_path / "ck" / "checkpoint_last.pt"
    with pytest.raises(ConversionError, match=r"no tokenizer_fingerprint\.json .*--spm-model FILE"):
        hf_convert.export_hf(ckpt, tmp_path / "hf")
    assert not (tmp_path / "hf").exists()
    hf_convert.export_hf(ckpt, tmp_path / "hf", spm_model=corpus_dir / "spm.model")
    assert (tmp_path / "hf" / "tokenizer.json").is_file()
    assert not (tmp_path / "hf" / "vocab.txt").exists()


def test_electra_export_loads_in_transformers(tmp_path, electra_pair, vocab, batch):
    from transformers import ElectraForMaskedLM, ElectraForPreTraining

    _, disc, gen, out = electra_pair
    written = hf_convert.export_hf(out / "model.pt", tmp_path / "hf")
    assert written == ["ElectraForPreTraining", "ElectraForMaskedLM (generator/)"]
    d2 = ElectraForPreTraining.from_pretrained(str(tmp_path / "hf")).eval()
    g2 = ElectraForMaskedLM.from_pretrained(str(tmp_path / "hf" / "generator")).eval()
    ids, att, mask = batch
    with torch.no_grad():
        assert (
            max_diff(
                disc(input_ids=ids, attention_mask=att).logits,
                d2(input_ids=ids, attention_mask=att).logits,
                mask,
            )
            <= TOL
        )
        assert (
            max_diff(
                gen(input_ids=ids, attention_mask=att).logits,
                g2(input_ids=ids, attention_mask=att).logits,
                mask,
            )
            <= TOL
        )
    # the published ids come back (vocab.txt beside the imported checkpoint)
    assert (tmp_path / "hf" / "vocab.txt").read_text() == (out / "vocab.txt").read_text()


def test_bert_export_loads_in_transformers(tmp_path, vocab, batch):
    from transformers import BertForMaskedLM

    hf = save_bert(tmp_path / "hf", vocab=vocab)
    out = hf_convert.import_hf(tmp_path / "hf", tmp_path / "out")
    assert hf_convert.export_hf(out / "model.pt", tmp_path / "back") == ["BertForMaskedLM"]
    back = BertForMaskedLM.from_pretrained(str(tmp_path / "back")).eval()
    ids, att, mask = batch
    with torch.no_grad():
        assert (
            max_diff(
                hf(input_ids=ids, attention_mask=att).logits,
                back(input_ids=ids, attention_mask=att).logits,
                mask,
            )
            <= TOL
        )
        # segment 1 survives the round trip too (token-type offsets kept beside the folded row 0)
        tt = torch.ones_like(ids)
        assert (
            max_diff(
                hf(input_ids=ids, attention_mask=att, token_type_ids=tt).logits,
                back(input_ids=ids, attention_mask=att, token_type_ids=tt).logits,
                mask,
            )
            <= TOL
        )
    cfg = json.loads((tmp_path / "back" / "config.json").read_text())
    assert cfg["layer_norm_eps"] == pytest.approx(1e-12) and cfg["pad_token_id"] == 0


@pytest.mark.parametrize("kind", ["bert", "electra"])
@pytest.mark.parametrize("with_vocab", [True, False])
def test_import_of_export_leaves_every_tensor_equal(
    tmp_path, electra_pair, vocab, kind, with_vocab
):
    if kind == "bert":
        save_bert(tmp_path / "hf", vocab=vocab)
        src = hf_convert.import_hf(tmp_path / "hf", tmp_path / "src") / "model.pt"
    else:
        src = electra_pair[3] / "model.pt"
    # a checkpoint away from its vocab.txt exports in fairseq's row order; with it, in HF's
    ckpt_dir = tmp_path / "ckpt"
    ckpt_dir.mkdir()
    shutil.copy(src, ckpt_dir / "model.pt")
    shutil.copy(src.parent / "dict.txt", ckpt_dir / "dict.txt")
    vocab_file = src.parent / "vocab.txt" if with_vocab else None
    hf_convert.export_hf(ckpt_dir / "model.pt", tmp_path / "hf_out", vocab_file=vocab_file)
    gen = tmp_path / "hf_out" / "generator" if kind == "electra" else None
    again = hf_convert.import_hf(tmp_path / "hf_out", tmp_path / "again", generator_dir=gen)
    a, b = model_state(src), model_state(again / "model.pt")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.mark.parametrize("untie", [False, True])
def test_roberta_export_loads_in_transformers(tmp_path, data_bin, untie):
    from fairseq_runs import TINY_ROBERTA, build_components, valid_batch
    from transformers import RobertaForMaskedLM

    arch = [*TINY_ROBERTA, *(["--untie-weights-roberta"] if untie else [])]
    task, model, _ = build_components(data_bin, ["--criterion", "masked_lm"], arch_args=arch)
    model.eval()
    if untie:  # an output projection of its own, away from the embeddings
        with torch.no_grad():
            model.encoder.lm_head.weight.normal_(0, 0.2)
    ckpt = tmp_path / "rob.pt"
    save_fresh_checkpoint(ckpt, _cfg_of(data_bin, arch), model)
    # the dictionary's rows alone (tests/test_export_tokenizer.py exports its tokenizer)
    assert hf_convert.export_hf(ckpt, tmp_path / "hf", tokenizer=False) == ["RobertaForMaskedLM"]
    hf = RobertaForMaskedLM.from_pretrained(str(tmp_path / "hf")).eval()
    ids = valid_batch(task)["net_input"]["src_tokens"][:3].clone()  # B x T
    ids[1, 30:] = ids[2, 12:] = task.source_dictionary.pad()  # right padding
    mask = ids.ne(task.source_dictionary.pad())
    with torch.no_grad():
        ref, _ = model(ids)
        got = hf(input_ids=ids, attention_mask=mask.long()).logits
    assert max_diff(ref, got, mask) <= TOL
    assert (tmp_path / "hf" / "dict.txt").read_text() == (data_bin / "dict.txt").read_text()


def _cfg_of(data_bin, arch_args):
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_training_parser()
    ns = options.parse_args_and_arch(
        parser, [str(data_bin), "--task", "masked_lm", "--cpu", *arch_args]
    )
    return convert_namespace_to_omegaconf(ns)


# ---- bad input: one clear error each, nothing written ------------------------------------------
def _assert_nothing_written(parent, name="out"):
    assert not (parent / name).exists()
    assert not [p for p in parent.iterdir() if p.name.startswith(f".{name}.")]


def test_hub_name_is_refused_with_download_hint(tmp_path):
    with pytest.raises(ConversionError, match=r"not a local directory.*download it first"):
        hf_convert.import_hf("bert-base-uncased", tmp_path / "out")
    _assert_nothing_written(tmp_path)


def test_unsupported_architecture_names_found_and_supported(tmp_path):
    from transformers import RobertaConfig, RobertaForMaskedLM

    RobertaForMaskedLM(
        RobertaConfig(
            vocab_size=50,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
        )
    ).save_pretrained(str(tmp_path / "hf"))
    with pytest.raises(
        ConversionError,
        match=r"\['RobertaForMaskedLM'\] are not supported.*BertForMaskedLM.*ElectraForPreTraining",
    ):
        hf_convert.import_hf(tmp_path / "hf", tmp_path / "out")
    _assert_nothing_written(tmp_path)


def test_missing_weights_and_missing_vocab(tmp_path, vocab):
    save_bert(tmp_path / "hf", vocab=vocab)
    (tmp_path / "hf" / "vocab.txt").unlink()
    with pytest.raises(
        ConversionError, match="no vocabulary in .*vocab.txt or a WordPiece tokenizer.json"
    ):
        hf_convert.import_hf(tmp_path / "hf", tmp_path / "out")
    (tmp_path / "hf" / "vocab.txt").write_text("\n".join(vocab) + "\n")
    (tmp_path / "hf" / "model.safetensors").unlink()
    with pytest.raises(ConversionError, match="no weights in .*model.safetensors"):
        hf_convert.import_hf(tmp_path / "hf", tmp_path / "out")
    _assert_nothing_written(tmp_path)


def test_vocab_size_differs_from_embedding(tmp_path, vocab):
    save_bert(tmp_path / "hf", vocab=vocab)
    (tmp_path / "hf" / "vocab.txt").write_text("\n".join(vocab[:-3]) + "\n")
    with pytest.raises(
        ConversionError,
        match=rf"vocabulary has {len(vocab) - 3} entries but the word embedding has {len(vocab)} rows",
    ):
        hf_convert.import_hf(tmp_path / "hf", tmp_path / "out")
    _assert_nothing_written(tmp_path)


def test_generator_embedding_size_mismatch(tmp_path, vocab):
    save_electra_pair(tmp_path / "disc", tmp_path / "gen", vocab=vocab, gen_embedding_size=8)
    with pytest.raises(ConversionError, match=r"generator .* embeddings \(\d+, 8\).*must match"):
        hf_convert.import_hf(tmp_path / "disc", tmp_path / "out", generator_dir=tmp_path / "gen")
    _assert_nothing_written(tmp_path)


def test_existing_output_survives_a_failed_import(tmp_path, vocab):
    save_bert(tmp_path / "hf", vocab=vocab)
    hf_convert.import_hf(tmp_path / "hf", tmp_path / "out")
    before = (tmp_path / "out" / "model.pt").read_bytes()
    (tmp_path / "hf" / "vocab.txt").write_text("\n".join(vocab[:-1]) + "\n")
    with pytest.raises(ConversionError):
        hf_convert.import_hf(tmp_path / "hf", tmp_path / "out")
    assert (tmp_path / "out" / "model.pt").read_bytes() == before


def test_cli_import_export_and_errors(tmp_path, vocab):
    save_bert(tmp_path / "hf", vocab=vocab)
    ok = run_script("convert_hf.py", ["import", str(tmp_path / "hf"), str(tmp_path / "out")])
    assert ok.returncode == 0, ok.stderr
    ok = run_script(
        "convert_hf.py", ["export", str(tmp_path / "out" / "model.pt"), str(tmp_path / "back")]
    )
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "back" / "model.safetensors").is_file()
    for name, content in (
        ("missing.pt", None),
        ("truncated.pt", (tmp_path / "out" / "model.pt").read_bytes()[:4096]),
    ):
        path = tmp_path / name
        if content is not None:
            path.write_bytes(content)
        bad = run_script("convert_hf.py", ["export", str(path), str(tmp_path / "back2")])
        want = (
            f"checkpoint {path} not found"
            if content is None
            else f"{path} is not a readable checkpoint"
        )
        assert (
            bad.returncode == 2 and want in bad.stderr and "Traceback" not in bad.stderr
        ), bad.stderr[-2000:]
        assert not (tmp_path / "back2").exists()
    bad = run_script("convert_hf.py", ["import", str(tmp_path / "nope"), str(tmp_path / "out2")])
    assert bad.returncode == 2 and "is not a local directory" in bad.stderr
    bad = run_script(
        "convert_hf.py",
        [
            "import",
            str(tmp_path / "out"),
            str(tmp_path / "out2"),
            "--generator",
            str(tmp_path / "hf"),
        ],
    )
    assert bad.returncode == 2 and "no config.json" in bad.stderr
    assert not (tmp_path / "out2").exists()


def test_an_untied_bert_head_imports_untied_and_exports_untied(tmp_path, vocab, batch):
    """tie_word_embeddings false: transformers keeps the decoder weight apart from the word
    embeddings; the import keeps it as its own tensor (logits equal), records it for
    --bert-sizes-from, and the export writes it back untied."""
    from transformers import BertForMaskedLM

    hf = save_bert(tmp_path / "hf", vocab=vocab, tie_word_embeddings=False)
    dec = hf.cls.predictions.decoder.weight
    assert (dec - hf.bert.embeddings.word_embeddings.weight).abs().max() > 0.01  # truly untied
    out = hf_convert.import_hf(tmp_path / "hf", tmp_path / "out")
    model, _ = load(out / "model.pt")
    head = model.encoder.lm_head
    assert head.weight is not model.encoder.sentence_encoder.embed_tokens.weight
    ids, att, mask = batch
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=att).logits
        logits, _ = model(to_fairseq_ids(ids, vocab))
    assert max_diff(ref[..., hf_order(vocab)], logits, mask) <= TOL
    record = json.loads((out / "import.json").read_text())["model_args"]
    assert record["untie_weights_roberta"] is True
    assert hf_convert.export_hf(out / "model.pt", tmp_path / "back") == ["BertForMaskedLM"]
    assert (
        json.loads((tmp_path / "back" / "config.json").read_text())["tie_word_embeddings"] is False
    )
    back = BertForMaskedLM.from_pretrained(str(tmp_path / "back")).eval()
    with torch.no_grad():
        again = back(input_ids=ids, attention_mask=att).logits
    assert max_diff(ref, again, mask) <= TOL


def test_a_tied_bert_exports_tied(tmp_path, vocab):
    save_bert(tmp_path / "hf", vocab=vocab)
    out = hf_convert.import_hf(tmp_path / "hf", tmp_path / "out")
    assert (
        json.loads((out / "import.json").read_text())["model_args"]["untie_weights_roberta"]
        is False
    )
    hf_convert.export_hf(out / "model.pt", tmp_path / "back")
    assert (
        json.loads((tmp_path / "back" / "config.json").read_text())["tie_word_embeddings"] is True
    )


def test_an_untied_electra_generator_is_refused(tmp_path, vocab):
    from transformers import ElectraForMaskedLM

    root = tmp_path
    save_electra_pair(root / "disc", root / "gen", vocab=vocab)
    gen = ElectraForMaskedLM.from_pretrained(str(root / "gen"))
    gen.config.tie_word_embeddings = False
    untied = ElectraForMaskedLM(gen.config)
    untied.load_state_dict(gen.state_dict())
    with torch.no_grad():
        untied.generator_lm_head.weight.add_(0.1)
    shutil.rmtree(root / "gen")
    untied.save_pretrained(str(root / "gen"))
    with pytest.raises(ConversionError, match=r"gen/config\.json: tie_word_embeddings is false"):
        hf_convert.import_hf(root / "disc", root / "out", generator_dir=root / "gen")
    assert not (root / "out").exists()
