"""Vocabularies between HuggingFace and fairseq, kept apart from the weights because the row order
decides how every embedding and output row moves.

fairseq puts ``<s> <pad> </s> <unk>`` first and adds ``<mask>`` last, so the fairseq rows are
HF's ``[CLS] [PAD] [SEP] [UNK]``, then every other WordPiece entry in HF id order, then
``[MASK]``; ``dict.txt`` lists the entries between (same vocabulary size). An export writes
the tokenizer files ``transformers`` reads: WordPiece for BERT, and for ELECTRA of WordPiece data;
for RoBERTa, and for ELECTRA of sentencepiece or GPT-2 BPE data, GPT-2's byte-level BPE or a
fast tokenizer of its sentencepiece pieces (:func:`roberta_tokenizer` finds which, from the flags or the data's
record; :func:`_data_pieces` tells the data's pieces)."""

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from truneg_fairseq.convert.hf_dir import _read_json
from truneg_fairseq.errors import ConversionError
from truneg_fairseq.text import BERT_MASK, BERT_SPECIALS

logger = logging.getLogger(__name__)


# HF WordPiece special -> fairseq symbol, in fairseq's row order (<mask> is appended last)
SPECIALS, MASK = BERT_SPECIALS, BERT_MASK


def hf_vocab_from_dictionary(symbols: List[str]) -> List[str]:
    """fairseq dictionary symbols (row order) -> WordPiece entries with BERT's special names."""
    to_hf = {fs: hf for hf, fs in SPECIALS + (MASK,)}
    return [to_hf.get(s, s) for s in symbols]


def _hf_vocab_order(symbols: List[str], vocab_file: Optional[Path]) -> Tuple[List[str], List[int]]:
    """(HF vocabulary, fairseq row of each HF id). With ``vocab_file`` (the original vocab.txt,
    e.g. the import's) the original ids come back; without it, fairseq's row order is kept."""
    names = hf_vocab_from_dictionary(symbols)
    if vocab_file is None:
        return names, list(range(len(names)))
    with open(vocab_file, encoding="utf-8") as f:
        vocab = [line.rstrip("\r\n") for line in f]
    while vocab and vocab[-1] == "":
        vocab.pop()
    row = {t: i for i, t in enumerate(names)}
    if len(vocab) != len(names) or set(vocab) != set(row):
        raise ConversionError(
            f"--vocab {vocab_file} ({len(vocab)} entries) is not the model's vocabulary ({len(names)} entries "
            "in its dict.txt); give the vocab.txt written by the import, or leave --vocab out"
        )
    return vocab, [row[t] for t in vocab]


def _write_wordpiece(out: Path, vocab: List[str], lowercase: bool, max_length: int) -> None:
    """vocab.txt and a tokenizer_config.json whose ``model_max_length`` is the position table's
    size: transformers' tokenizers then truncate (``truncation=True``, pipelines) to what the
    model can take instead of passing a longer input that fails inside the model."""
    with open(out / "vocab.txt", "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in vocab))
    tok_cfg = {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": lowercase,
        "unk_token": "[UNK]",
        "sep_token": "[SEP]",
        "pad_token": "[PAD]",
        "cls_token": "[CLS]",
        "mask_token": "[MASK]",
        "model_max_length": int(max_length),
    }
    with open(out / "tokenizer_config.json", "w", encoding="utf-8") as f:
        json.dump(tok_cfg, f, indent=2)


def gpt2_vocab(symbols: List[str], encoder_json) -> Tuple[Dict[str, int], List[str]]:
    """(vocab.json: GPT-2 BPE string -> the dictionary's row, then the BPE strings the
    dictionary lacks, in encoder.json's order, with the ids after its rows; those strings). The specials and fairseq's ``madeupword`` fillers keep
    their names. The BPE's merges go through strings the dictionary may lack (the text never
    produced them alone): they get the ids after the dictionary's rows, as sentencepiece's do."""
    gpt2 = _read_json(Path(encoder_json))
    by_id = {v: k for k, v in gpt2.items()}
    vocab: Dict[str, int] = {}
    for row, sym in enumerate(symbols):
        key = by_id.get(int(sym), sym) if sym.isdigit() else sym
        if key in vocab:
            raise ConversionError(
                f"dictionary entries {row} and {vocab[key]} are both {key!r} of {encoder_json}"
            )
        vocab[key] = row
    extra = [t for t, _ in sorted(gpt2.items(), key=lambda kv: kv[1]) if t not in vocab]
    vocab.update((t, len(symbols) + i) for i, t in enumerate(extra))
    return vocab, extra


def _write_dict_only(out: Path, dict_txt: Path) -> None:
    """fairseq's dict alone (``--no-tokenizer``)."""
    shutil.copyfile(dict_txt, out / "dict.txt")
    logger.warning(
        "export with --no-tokenizer: only dict.txt is written; transformers cannot "
        "tokenize text for this directory"
    )


def _write_gpt2_tokenizer(
    out: Path, vocab: Dict[str, int], vocab_bpe, dict_txt: Path, max_length: int
) -> None:
    """fairseq's dict and the byte-level BPE files ``transformers``' RoBERTa tokenizer reads
    (vocab.json from :func:`gpt2_vocab`, GPT-2's vocab.bpe as merges.txt)."""
    shutil.copyfile(dict_txt, out / "dict.txt")
    with open(out / "vocab.json", "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    shutil.copyfile(vocab_bpe, out / "merges.txt")
    _write_tokenizer_config(out, "RobertaTokenizer", max_length)


def _write_sentencepiece_tokenizer(out: Path, tok, dict_txt: Path, max_length: int) -> None:
    """fairseq's dict and the fast tokenizer of its sentencepiece pieces
    (:func:`~truneg_fairseq.text.hf_tokenizer.sentencepiece_tokenizer`): tokenizer.json and its
    config, which ``AutoTokenizer`` and the pipelines load as they are."""
    shutil.copyfile(dict_txt, out / "dict.txt")
    tok.save(str(out / "tokenizer.json"))
    _write_tokenizer_config(out, "PreTrainedTokenizerFast", max_length)


def _write_tokenizer_config(out: Path, tokenizer_class: str, max_length: int) -> None:
    """tokenizer_config.json with fairseq's specials; ``model_max_length`` is what the position
    table takes."""
    with open(out / "tokenizer_config.json", "w", encoding="utf-8") as f:
        json.dump(
            {
                "tokenizer_class": tokenizer_class,
                "bos_token": "<s>",
                "eos_token": "</s>",
                "sep_token": "</s>",
                "cls_token": "<s>",
                "unk_token": "<unk>",
                "pad_token": "<pad>",
                "mask_token": "<mask>",
                "model_max_length": int(max_length),
            },
            f,
            indent=2,
        )


def _recorded_lowercase(checkpoint, vocab_file, symbols) -> bool:
    """Whether the exported tokenizer lower-cases: as the import recorded it, else as the
    vocabulary shows (lower-case only when no entry has an upper-case letter), the rule the
    plugin's own WordPiece applies (``--lowercase auto``)."""
    from truneg_fairseq.text import uncased

    for d in (Path(checkpoint).parent, Path(vocab_file).parent if vocab_file else None):
        if (
            d is not None
            and (d / "import.json").is_file()
            and _read_json(d / "import.json").get("lowercase") is not None
        ):
            return bool(_read_json(d / "import.json")["lowercase"])
    vocab = symbols
    if vocab_file is not None and Path(vocab_file).is_file():
        vocab = Path(vocab_file).read_text(encoding="utf-8").splitlines()
    return uncased([t for t in vocab if not (t.startswith("<") and t.endswith(">"))])


NO_TOKENIZER = (
    "or --no-tokenizer to write dict.txt alone (a directory transformers cannot tokenize for)"
)


def roberta_tokenizer(checkpoint, where: Path, symbols, gpt2_files, spm_model, model="RoBERTa"):
    """(``"sentencepiece"``, .model) or (``"gpt2"``, (encoder.json, vocab.bpe)): the tokenizer an
    export that keeps fairseq's ids writes (a RoBERTa's, an ELECTRA's of the same data: ``model``
    names it in the errors), from the flags or else the data directory's record
    (``tokenizer_fingerprint.json``), checked against that record and the dictionary; one
    :class:`ConversionError` naming the flags or the missing file when none can be written."""
    from truneg_fairseq.text import build_tokenizer, check_record, read_record, word_marks
    from truneg_fairseq.text.spec import RECORD_NAME, TokenizerError, TokenizerSpec

    record = where / RECORD_NAME
    try:
        rec = read_record(where)
        if gpt2_files:
            spec = TokenizerSpec(
                "gpt2", gpt2_encoder_json=gpt2_files[0], gpt2_vocab_bpe=gpt2_files[1]
            )
        elif spm_model:
            spec = TokenizerSpec("sentencepiece", spm_model=str(spm_model))
        elif rec is None:
            digits = sum(s.isdigit() for s in symbols)
            family = "gpt2" if digits * 2 > len(symbols) else word_marks(symbols)[0]
            if family == "gpt2":
                need = "--gpt2-encoder-json FILE --gpt2-vocab-bpe FILE (the GPT-2 BPE files"
            elif family == "sentencepiece":
                need = "--spm-model FILE (the sentencepiece model"
            else:
                need = (
                    "--spm-model FILE (sentencepiece) or --gpt2-encoder-json FILE "
                    "--gpt2-vocab-bpe FILE (GPT-2 BPE: the files"
                )
            raise ConversionError(
                f"the export writes the tokenizer of the {model} checkpoint's data, and {where} has "
                f"no {RECORD_NAME} naming it: give {need} that tokenized its data), {NO_TOKENIZER}"
            )
        else:
            files = {k: f["path"] for k, f in rec["files"].items()}
            kind = rec["tokenizer"]
            if kind == "sentencepiece":
                flags = "--spm-model FILE"
            elif kind == "gpt2":
                flags = "--gpt2-encoder-json FILE --gpt2-vocab-bpe FILE"
            else:
                raise ConversionError(
                    f"{checkpoint} was trained on {kind} tokens ({record}); the {model} export "
                    "writes a HuggingFace tokenizer for sentencepiece and GPT-2 BPE data: "
                    f"export it {NO_TOKENIZER[3:]}"
                )
            gone = [p for p in files.values() if not Path(p).is_file()]
            if gone:
                raise ConversionError(
                    f"{record} records {', '.join(gone)}, which is gone: give the file that "
                    f"tokenized the data with {flags}, {NO_TOKENIZER}"
                )
            spec = TokenizerSpec(
                kind,
                files.get("spm_model"),
                files.get("gpt2_encoder_json"),
                files.get("gpt2_vocab_bpe"),
            )
        tok = build_tokenizer(spec)
        check_record(where / "dict.txt", tok)
        tok.vocab_view(symbols, 4, f"the dictionary of {checkpoint}")  # another one's: refused
    except TokenizerError as e:
        raise ConversionError(str(e)) from None
    if spec.kind == "gpt2":
        return "gpt2", (spec.gpt2_encoder_json, spec.gpt2_vocab_bpe)
    return "sentencepiece", spec.spm_model


def _fairseq_vocab(symbols, tokenizer) -> Tuple[List[str], List[int], object]:
    """(vocabulary, fairseq row of each id, the HF tokenizer to write or None) of an export that
    keeps fairseq's ids (sentencepiece or GPT-2 BPE data): the dictionary's rows, then the
    pieces the tokenizer can produce that the dictionary lacks, each on a row copying
    ``<unk>``'s (fairseq reads them as ``<unk>``)."""
    vocab, rows = list(symbols), list(range(len(symbols)))
    extra: List[str] = []
    hf_tok = None
    if tokenizer is not None and tokenizer[0] == "sentencepiece":
        from truneg_fairseq.text.hf_tokenizer import sentencepiece_tokenizer

        hf_tok, extra = sentencepiece_tokenizer(tokenizer[1], vocab)
    elif tokenizer is not None:
        hf_tok, extra = gpt2_vocab(symbols, tokenizer[1][0])
    vocab += extra
    rows += [symbols.index("<unk>")] * len(extra)
    return vocab, rows, hf_tok


def _write_fairseq_tokenizer(out: Path, tokenizer, hf_tok, dict_txt: Path, max_length: int) -> None:
    """The tokenizer files of an export that keeps fairseq's ids (``dict.txt`` alone when
    ``tokenizer`` is None: ``--no-tokenizer``)."""
    if tokenizer is None:
        _write_dict_only(out, dict_txt)
    elif tokenizer[0] == "sentencepiece":
        _write_sentencepiece_tokenizer(out, hf_tok, dict_txt, max_length)
    else:
        _write_gpt2_tokenizer(out, hf_tok, tokenizer[1][1], dict_txt, max_length)


def _data_pieces(cfg, data, symbols) -> Tuple[str, str]:
    """(tokenizer, how it is known) of the checkpoint's data: the one its data directory records
    (``tokenizer_fingerprint.json``), else what its dictionary shows (sentencepiece's word-start
    marks, GPT-2 BPE's numeric ids), else ``"wordpiece"``."""
    from truneg_fairseq.text.marks import word_marks
    from truneg_fairseq.text.record import RECORD_NAME, read_record
    from truneg_fairseq.text.spec import SP_SPACE, TokenizerError

    where = Path(str(data or cfg.task.data).split(os.pathsep)[0])
    try:
        rec = read_record(where)
    except TokenizerError:
        rec = None  # an unreadable record: the vocabulary alone decides, as without one
    if rec is not None:
        return rec["tokenizer"], str(where / RECORD_NAME)
    marked = word_marks(symbols)[1]["sentencepiece"]
    if marked * 10 >= len(symbols):
        return (
            "sentencepiece",
            f"{marked} of {len(symbols)} entries of its dictionary start with {SP_SPACE!r}",
        )
    digits = sum(s.isdigit() for s in symbols)
    if digits * 2 > len(symbols):
        return "gpt2", f"{digits} of {len(symbols)} entries of its dictionary are GPT-2 BPE ids"
    return "wordpiece", "its dictionary"


def _check_wordpiece_data(checkpoint, cfg, data, kind: str, symbols=()) -> None:
    """A BERT export writes a WordPiece tokenizer (``BertTokenizer``): refuse a model whose data
    is of other pieces (:func:`_data_pieces`), which a ``BertTokenizer`` would not produce (a
    sentencepiece ``▁word`` or a GPT-2 BPE id is never a WordPiece of the text: most words
    would become ``[UNK]``)."""
    pieces, found = _data_pieces(cfg, data, symbols)
    if pieces in ("wordpiece", "whitespace"):
        return
    raise ConversionError(
        f"{checkpoint} is a {kind} trained on {pieces} pieces ({found}); a HuggingFace BERT "
        "export writes a WordPiece tokenizer, which would read most words as [UNK]. Train on "
        "WordPiece data to export it (prepare_corpus.py --tokenizer wordpiece --vocab "
        "VOCAB.txt), or use the checkpoint with fairseq (truneg_fairseq.models.hub); an ELECTRA "
        "or a RoBERTa of such data exports with its own tokenizer"
    )
