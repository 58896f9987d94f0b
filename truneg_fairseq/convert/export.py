"""Export (:func:`export_hf`): an ELECTRA checkpoint gives ``ElectraForPreTraining``
(+ ``generator/`` with ``ElectraForMaskedLM`` when the checkpoint has a generator), a ``bert``
checkpoint ``BertForMaskedLM`` and a fairseq ``roberta`` checkpoint ``RobertaForMaskedLM``, each
with ``config.json`` and the tokenizer of its data: WordPiece (``vocab.txt``) for WordPiece data;
for sentencepiece or GPT-2 BPE data (RoBERTa, and ELECTRA pre-trained on the same data) GPT-2's
BPE files or a fast tokenizer of its sentencepiece pieces whose ids are the dictionary's rows
(:func:`~truneg_fairseq.convert.vocab.roberta_tokenizer`). Only torch, safetensors and the
tokenizer libraries are needed (no ``transformers``), so an export runs wherever the plugin
trains."""

import json
import logging
import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch

from truneg_fairseq.checkpoints import load_for_inference
from truneg_fairseq.convert.checks import check_finite
from truneg_fairseq.convert.keys import (
    BERT_MLM_HEAD,
    BERT_POOLER,
    DISCRIMINATOR_HEAD,
    ELECTRA_PROJECTION,
    FAIRSEQ_TO_HF_ACT,
    GENERATOR_HEAD,
    ROBERTA_MLM_HEAD,
    _fairseq_to_hf,
    _layer_table,
)
from truneg_fairseq.convert.vocab import (
    _check_wordpiece_data,
    _data_pieces,
    _fairseq_vocab,
    _hf_vocab_order,
    _recorded_lowercase,
    _write_fairseq_tokenizer,
    _write_wordpiece,
    roberta_tokenizer,
)
from truneg_fairseq.errors import ConversionError
from truneg_fairseq.outputs import atomic_dir

logger = logging.getLogger(__name__)

UNPREDICTED = -1.0e4  # output bias of an exported row that stands for <unk> (exp(-1e4) == 0)


def _write_hf(out: Path, config: dict, tensors: Dict[str, torch.Tensor]) -> None:
    from safetensors.torch import save_file

    with open(out / "config.json", "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    save_file(
        {k: v.detach().float().contiguous().clone() for k, v in tensors.items()},
        str(out / "model.safetensors"),
        metadata={"format": "pt"},
    )


def _common_config(
    arch,
    model_type,
    vocab,
    hidden,
    layers,
    heads,
    ffn,
    act,
    eps,
    max_pos,
    dropout,
    attn_dropout,
    pad,
):
    if act not in FAIRSEQ_TO_HF_ACT:
        raise ConversionError(
            f"activation {act!r} has no HuggingFace counterpart ({', '.join(FAIRSEQ_TO_HF_ACT)})"
        )
    return {
        "architectures": [arch],
        "model_type": model_type,
        "vocab_size": vocab,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": ffn,
        "hidden_act": FAIRSEQ_TO_HF_ACT[act],
        "layer_norm_eps": float(eps),
        "max_position_embeddings": max_pos,
        "hidden_dropout_prob": float(dropout),
        "attention_probs_dropout_prob": float(attn_dropout),
        "pad_token_id": pad,
        "initializer_range": 0.02,
        "tie_word_embeddings": True,
    }


def _export_electra(
    model,
    symbols,
    vocab_file,
    out: Path,
    lowercase: bool,
    fairseq_ids: bool = False,
    tokenizer=None,
    dict_txt: Optional[Path] = None,
) -> List[str]:
    """``fairseq_ids``: the data was sentencepiece or GPT-2 BPE, so the export keeps the
    dictionary's ids and writes ``tokenizer`` (:func:`_fairseq_vocab`) instead of WordPiece."""
    c = model.cfg
    s = {k: v for k, v in model.state_dict().items()}
    pad = model.padding_idx
    if fairseq_ids:
        vocab, rows, hf_tok = _fairseq_vocab(symbols, tokenizer)
        hf_pad = pad
    else:
        vocab, rows = _hf_vocab_order(symbols, vocab_file)
        hf_pad = vocab.index("[PAD]")
    rows_t = torch.tensor(rows)
    E, H = c.electra_embed_dim, c.electra_hidden_dim
    emb = {
        "electra.embeddings.word_embeddings.weight": s["embeddings.embed_tokens.weight"][rows_t],
        "electra.embeddings.position_embeddings.weight": s["embeddings.embed_positions.weight"][
            pad + 1 :
        ],
        "electra.embeddings.token_type_embeddings.weight": torch.zeros(2, E),
        "electra.embeddings.LayerNorm.weight": s["embeddings.layer_norm.weight"],
        "electra.embeddings.LayerNorm.bias": s["embeddings.layer_norm.bias"],
    }
    max_pos = emb["electra.embeddings.position_embeddings.weight"].size(0)
    act = str(c.electra_activation_fn)
    if act != "gelu":
        raise ConversionError(
            f"ELECTRA with --electra-activation-fn {act}: HuggingFace's ELECTRA heads use erf GELU"
        )

    def stack(prefix, hidden, layers, heads, ffn, arch):
        t = dict(emb)
        t.update(
            _fairseq_to_hf(s, _layer_table("electra.encoder.layer.", prefix + "layers.", layers))
        )
        if prefix + "project.weight" in s:
            t.update(_fairseq_to_hf(s, ELECTRA_PROJECTION, fs_base=prefix))
        conf = _common_config(
            arch,
            "electra",
            len(vocab),
            hidden,
            layers,
            heads,
            ffn,
            act,
            c.electra_layernorm_eps,
            max_pos,
            c.electra_dropout,
            c.electra_attention_dropout,
            hf_pad,
        )
        conf.update(
            {
                "embedding_size": E,
                "type_vocab_size": 2,
                "summary_type": "first",
                "summary_use_proj": True,
                "summary_activation": "gelu",
                "summary_last_dropout": 0.1,
            }
        )
        return t, conf

    t, conf = stack(
        "discriminator.",
        H,
        c.electra_layers,
        c.electra_heads,
        c.electra_ffn_dim,
        "ElectraForPreTraining",
    )
    t.update(_fairseq_to_hf(s, DISCRIMINATOR_HEAD))

    def write_tokenizer(where: Path) -> None:
        if fairseq_ids:  # HF's ELECTRA counts positions from 0: the whole table is usable
            _write_fairseq_tokenizer(where, tokenizer, hf_tok, dict_txt, max_pos)
        else:
            _write_wordpiece(where, vocab, lowercase, max_pos)

    _write_hf(out, conf, t)
    write_tokenizer(out)
    written = ["ElectraForPreTraining"]
    if model.generator is not None:
        g = out / "generator"
        g.mkdir()
        t, conf = stack(
            "generator.",
            c.electra_gen_hidden_dim,
            c.electra_gen_layers,
            c.electra_gen_heads,
            c.electra_gen_ffn_dim,
            "ElectraForMaskedLM",
        )
        t.update(_fairseq_to_hf(s, GENERATOR_HEAD))
        t["generator_lm_head.bias"] = s["generator_bias"][rows_t]
        # rows for pieces fairseq reads as <unk>: never predicted, so the distribution over the
        # dictionary's rows stays the checkpoint's
        t["generator_lm_head.bias"][len(symbols) :] = UNPREDICTED
        _write_hf(g, conf, t)
        write_tokenizer(g)
        written.append("ElectraForMaskedLM (generator/)")
    return written


def _export_roberta_family(
    model, symbols, vocab_file, out: Path, lowercase: bool, dict_txt: Path, tokenizer
) -> List[str]:
    from truneg_fairseq.models.bert import BertModel

    a = model.args
    s = model.state_dict()
    enc = "encoder.sentence_encoder."
    is_bert = isinstance(model, BertModel)
    pad = model.encoder.sentence_encoder.padding_idx
    table = s[enc + "embed_positions.weight"]
    if is_bert:
        vocab, rows = _hf_vocab_order(symbols, vocab_file)
        prefix, arch, mtype = "bert.", "BertForMaskedLM", "bert"
        positions, types = table[pad + 1 :], s["bert_segment_offsets"]
        eps, hf_pad = a.bert_layernorm_eps, vocab.index("[PAD]")
    else:
        if vocab_file is not None:
            raise ConversionError(
                "--vocab is for WordPiece (BERT/ELECTRA) checkpoints; a RoBERTa export keeps fairseq's ids"
            )
        vocab, rows, hf_tok = _fairseq_vocab(symbols, tokenizer)
        prefix, arch, mtype = "roberta.", "RobertaForMaskedLM", "roberta"
        # HF's RoBERTa counts positions from padding_idx + 1 exactly as fairseq does
        positions, types = table, torch.zeros(1, table.size(1))
        eps, hf_pad = 1e-5, pad
    rows_t = torch.tensor(rows)
    words = s[enc + "embed_tokens.weight"][rows_t]
    t = {
        prefix + "embeddings.word_embeddings.weight": words,
        prefix + "embeddings.position_embeddings.weight": positions,
        prefix + "embeddings.token_type_embeddings.weight": types,
        prefix + "embeddings.LayerNorm.weight": s[enc + "layernorm_embedding.weight"],
        prefix + "embeddings.LayerNorm.bias": s[enc + "layernorm_embedding.bias"],
    }
    t.update(
        _fairseq_to_hf(
            s, _layer_table(prefix + "encoder.layer.", enc + "layers.", a.encoder_layers)
        )
    )
    t.update(_fairseq_to_hf(s, BERT_MLM_HEAD if is_bert else ROBERTA_MLM_HEAD))
    t[("cls.predictions." if is_bert else "lm_head.") + "bias"] = s["encoder.lm_head.bias"][rows_t]
    # --untie-weights-roberta (or an import of an untied head): the output projection is a
    # tensor of its own, written as the decoder weight with tie_word_embeddings false
    untied = model.encoder.lm_head.weight is not model.encoder.sentence_encoder.embed_tokens.weight
    if untied:
        decoder = ("cls.predictions." if is_bert else "lm_head.") + "decoder."
        t[decoder + "weight"] = s["encoder.lm_head.weight"][rows_t]
        t[decoder + "bias"] = s["encoder.lm_head.bias"][rows_t]  # untied, HF adds this one
    if len(rows) > len(symbols):  # rows for pieces fairseq reads as <unk>: never predicted, so
        # the distribution over the dictionary's rows stays the checkpoint's
        for key in ("lm_head.bias", "lm_head.decoder.bias"):
            if key in t:
                t[key][len(symbols) :] = UNPREDICTED
    conf = _common_config(
        arch,
        mtype,
        len(vocab),
        a.encoder_embed_dim,
        a.encoder_layers,
        a.encoder_attention_heads,
        a.encoder_ffn_embed_dim,
        a.activation_fn,
        eps,
        positions.size(0),
        a.dropout,
        a.attention_dropout,
        hf_pad,
    )
    conf["type_vocab_size"] = types.size(0)
    conf["tie_word_embeddings"] = not untied
    if not is_bert:
        conf.update({"bos_token_id": 0, "eos_token_id": 2})
    elif (
        s["bert_pooler_weight"].abs().max() > 0
    ):  # the source had a pooler (BertModel's pooled output)
        t.update(_fairseq_to_hf(s, BERT_POOLER, hf_base="bert."))
    _write_hf(out, conf, t)
    if is_bert:
        _write_wordpiece(out, vocab, lowercase, positions.size(0))
    else:  # fairseq's positions start after padding_idx, as HF RoBERTa's do
        _write_fairseq_tokenizer(out, tokenizer, hf_tok, dict_txt, positions.size(0) - pad - 1)
    return [arch]


def export_hf(
    checkpoint,
    hf_dir,
    vocab_file=None,
    data=None,
    lowercase: Optional[bool] = None,
    gpt2_files: Optional[Tuple[str, str]] = None,
    spm_model=None,
    tokenizer: bool = True,
) -> List[str]:
    """Write a plugin ELECTRA, BERT or fairseq RoBERTa checkpoint as a HuggingFace directory;
    returns the architectures written. ``vocab_file`` restores the original WordPiece ids;
    ``lowercase`` defaults to the import's record (``import.json``), else to what the
    vocabulary shows (:func:`_recorded_lowercase`). A RoBERTa export, and an ELECTRA export of
    sentencepiece or GPT-2 BPE data (:func:`_data_pieces`, or ``spm_model``/``gpt2_files``
    given), keeps fairseq's ids and writes the tokenizer of its data: a fast tokenizer of its
    sentencepiece pieces (``spm_model``, else the data directory's record), or GPT-2's BPE
    files (``gpt2_files``, else the record's); ``tokenizer=False`` writes ``dict.txt`` alone. The checkpoint is read by
    :func:`~truneg_fairseq.checkpoints.load_for_inference`, as every script reads one: a missing or
    unusable file is its :class:`~truneg_fairseq.checkpoints.CheckpointError`."""
    from fairseq.models.roberta import RobertaModel

    from truneg_fairseq.models.bert import BertModel
    from truneg_fairseq.models.electra import ElectraModel

    models, cfg, task = load_for_inference(checkpoint, data)
    model = models[0]
    check_finite(
        model.state_dict(),
        checkpoint,
        "export a checkpoint saved before training diverged (an earlier checkpoint_N_M.pt)",
    )
    symbols = list(task.source_dictionary.symbols)
    where = Path(str(data or cfg.task.data).split(os.pathsep)[0])
    name = type(model).__name__
    # an ELECTRA of sentencepiece or GPT-2 BPE data keeps fairseq's ids and writes its data's
    # tokenizer, as a RoBERTa does; of WordPiece (or word-level) data, a WordPiece vocabulary
    # (the plugin's BERT is a fairseq RoBERTa subclass: it is told apart first)
    fairseq_ids = (isinstance(model, RobertaModel) and not isinstance(model, BertModel)) or (
        isinstance(model, ElectraModel)
        and bool(
            spm_model
            or gpt2_files
            or _data_pieces(cfg, data, symbols)[0] not in ("wordpiece", "whitespace")
        )
    )
    if not fairseq_ids:
        flags = (("--spm-model", spm_model), ("--gpt2-encoder-json", gpt2_files))
        for flag, given in flags + (("--no-tokenizer", not tokenizer),):
            if given:
                raise ConversionError(
                    f"{flag} is for a RoBERTa or an ELECTRA of sentencepiece or GPT-2 BPE "
                    f"data; {checkpoint} holds a {name} exported with a WordPiece vocabulary"
                )
        if isinstance(model, BertModel):
            _check_wordpiece_data(checkpoint, cfg, data, name, symbols)
        tok_source = None
    else:
        if vocab_file is not None:
            raise ConversionError(
                f"--vocab is for models of WordPiece data; {checkpoint} is a {name} of "
                "sentencepiece or GPT-2 BPE data, whose export keeps fairseq's ids"
            )
        tok_source = (
            roberta_tokenizer(
                checkpoint,
                where,
                symbols,
                gpt2_files,
                spm_model,
                "ELECTRA" if isinstance(model, ElectraModel) else "RoBERTa",
            )
            if tokenizer
            else None
        )
    if vocab_file is None and not fairseq_ids and (Path(checkpoint).parent / "vocab.txt").is_file():
        vocab_file = Path(checkpoint).parent / "vocab.txt"  # an imported directory, as it is
    if lowercase is None:
        lowercase = _recorded_lowercase(checkpoint, vocab_file, symbols)
    if getattr(model, "classification_heads", None):
        logger.warning(
            f"classification heads {', '.join(model.classification_heads)} are not exported"
        )
    hf_dir = Path(hf_dir).resolve()
    inputs = {
        "CHECKPOINT": checkpoint,
        "--vocab": vocab_file,
        "--data": data,
        "--gpt2-encoder-json": gpt2_files and gpt2_files[0],
        "--gpt2-vocab-bpe": gpt2_files and gpt2_files[1],
        "--spm-model": spm_model,
    }
    with atomic_dir(hf_dir, "convert_hf.py export", inputs=inputs) as work, torch.no_grad():
        dict_txt = Path(str(cfg.task.data).split(os.pathsep)[0]) / "dict.txt"
        if isinstance(model, ElectraModel):
            written = _export_electra(
                model, symbols, vocab_file, work, lowercase, fairseq_ids, tok_source, dict_txt
            )
        elif isinstance(model, RobertaModel):
            written = _export_roberta_family(
                model, symbols, vocab_file, work, lowercase, dict_txt, tok_source
            )
        else:
            raise ConversionError(
                f"{checkpoint} holds a {type(model).__name__}; export supports the plugin's "
                "electra and bert models and fairseq's roberta"
            )
    logger.info(f"exported {checkpoint} to {hf_dir}: {', '.join(written)}")
    return written
