"""A fairseq ``dict.txt`` of sentencepiece pieces as a HuggingFace fast tokenizer
(``tokenizer.json``): the sentencepiece model's own algorithm (``tokenizers``' BPE with the
merges the pieces' scores order, or its Unigram with the pieces' scores), its normalisation and
``▁`` pre-tokenisation, and the ids of the fairseq dictionary's rows.

fairseq's dictionary holds the pieces the training text produced, in its own order; the
sentencepiece model also holds pieces the text never produced on their own (the intermediate
pieces of BPE merges, single characters), which the plugin reads as ``<unk>``. The tokenizer
still needs them (BPE merges through them; Unigram weighs them), so they get the ids after the
dictionary's rows: :func:`sentencepiece_tokenizer` returns them, and the export gives each a row
that copies ``<unk>``'s.
"""

from pathlib import Path
from typing import Dict, List, Tuple

from truneg_fairseq.text.spec import SP_SPACE, TokenizerError

# sentencepiece's piece types (sentencepiece_model.proto)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM, BPE = 1, 2
# fairseq's specials: in every dictionary, matched as whole tokens in text by the tokenizer
SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")


def read_spm_proto(path, flag: str = "--spm-model"):
    """The ``ModelProto`` of a sentencepiece ``.model`` (one :class:`TokenizerError` naming the
    file otherwise)."""
    from sentencepiece import sentencepiece_model_pb2

    path = Path(path)
    if not path.is_file():
        raise TokenizerError(f"{flag} {path} not found (the sentencepiece .model of the data)")
    proto = sentencepiece_model_pb2.ModelProto()
    try:
        proto.ParseFromString(path.read_bytes())
    except Exception as e:  # protobuf's DecodeError and relatives
        raise TokenizerError(f"{flag} {path} is not a sentencepiece model ({e})") from None
    if not proto.pieces:
        raise TokenizerError(f"{flag} {path} is not a sentencepiece model (it holds no pieces)")
    return proto


def _bpe_merges(pieces: Dict[str, int], scores: Dict[str, float]) -> List[Tuple[str, str]]:
    """The merges that make ``tokenizers``' BPE segment as sentencepiece's BPE does: every split
    of a piece into two pieces, ranked by the merged piece's score (sentencepiece merges the
    adjacent pair whose union scores highest; ``tokenizers`` the pair of lowest rank)."""
    ranked = []
    for piece, pid in pieces.items():
        for i in range(1, len(piece)):
            a, b = piece[:i], piece[i:]
            if a in pieces and b in pieces:
                ranked.append((-scores[piece], pid, pieces[a], a, b))
    ranked.sort()
    return [(a, b) for _, _, _, a, b in ranked]


def sentencepiece_tokenizer(spm_model, symbols: List[str], flag: str = "--spm-model"):
    """(``tokenizers.Tokenizer``, the pieces the dictionary lacks) for the fairseq dictionary
    ``symbols`` (row order, ``<mask>`` included) made with the sentencepiece model ``spm_model``.
    Every symbol's id is its row; the lacking pieces follow, in the model's order, with the ids
    ``len(symbols)``, ``len(symbols) + 1``, ...; ``<s> <pad> </s> <unk> <mask>`` are special
    tokens and a text becomes ``<s> pieces </s>`` as fairseq's masked-LM data reads it."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    proto = read_spm_proto(spm_model, flag)
    kind = proto.trainer_spec.model_type
    if kind not in (UNIGRAM, BPE):
        raise TokenizerError(
            f"{flag} {spm_model} is a sentencepiece model of type "
            f"{kind} (word or char): a HuggingFace tokenizer is written for unigram and bpe models"
        )
    missing = [s for s in SPECIALS if s not in symbols]
    if missing:
        raise TokenizerError(
            f"the dictionary lacks fairseq's special entries {', '.join(missing)}: it is not a "
            "masked-LM dictionary"
        )
    ids = {sym: row for row, sym in enumerate(symbols)}
    if len(ids) != len(symbols):
        raise TokenizerError("the dictionary lists an entry twice: one id each is needed")
    # the model's pieces as text can produce them (its <unk> is fairseq's, its controls never
    # come out of text)
    scores = {p.piece: p.score for p in proto.pieces if p.type in (NORMAL, USER_DEFINED, BYTE)}
    extra = [p for p in scores if p not in ids]
    ids.update((p, len(symbols) + i) for i, p in enumerate(extra))
    lowest = min(scores.values(), default=0.0)
    byte_fallback = bool(proto.trainer_spec.byte_fallback)
    if kind == BPE:
        merge_pieces = {p: i for i, p in enumerate(scores)}
        model = models.BPE(
            vocab=ids,
            merges=_bpe_merges(merge_pieces, scores),
            unk_token="<unk>",
            fuse_unk=True,  # sentencepiece reads a run of unknown characters as one piece
            byte_fallback=byte_fallback,
        )
    else:
        # an entry sentencepiece does not know (fairseq's specials, its madeupword fillers)
        # scores far below any piece: never chosen while pieces can cover the text
        table = sorted(ids.items(), key=lambda kv: kv[1])
        model = models.Unigram(
            [(p, scores.get(p, lowest - 1e6)) for p, _ in table],
            unk_id=ids["<unk>"],
            byte_fallback=byte_fallback,
        )
    tok = Tokenizer(model)
    norm = []
    charsmap = proto.normalizer_spec.precompiled_charsmap
    if charsmap:
        norm.append(normalizers.Precompiled(charsmap))
    if proto.normalizer_spec.remove_extra_whitespaces:
        norm += [normalizers.Replace(Regex(" {2,}"), " "), normalizers.Strip()]
    if norm:
        tok.normalizer = normalizers.Sequence(norm)
    scheme = "always" if proto.normalizer_spec.add_dummy_prefix else "never"
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SP_SPACE, prepend_scheme=scheme)
    tok.decoder = decoders.Metaspace(replacement=SP_SPACE, prepend_scheme=scheme)
    tok.add_special_tokens(
        [AddedToken(s, special=True, lstrip=s == "<mask>", normalized=False) for s in SPECIALS]
    )
    bos, eos = ("<s>", ids["<s>"]), ("</s>", ids["</s>"])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[bos, eos]
    )
    return tok, extra
