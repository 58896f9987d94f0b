"""The plugin's checkpoints through fairseq's hub interface, with the plugin registered.

fairseq's ``RobertaModel.from_pretrained(dir, checkpoint_file=...)`` reads a checkpoint with
``torch.load`` before it looks at the checkpoint's ``user_dir``; without ``import
truneg_fairseq`` first, current torch refuses the checkpoint's ``argparse.Namespace``
(``UnpicklingError``) and the plugin's architectures are unknown. That failure happens inside
fairseq and torch before any code of the plugin runs, so the plugin cannot reword it; this
module is the entry that needs no import beforehand::

    from truneg_fairseq.models.hub import from_pretrained

    lm = from_pretrained("imported/bert-base")  # model.pt, dict.txt, vocab.txt there
    lm.fill_mask("the big house <mask> the lake")

Loading goes through :func:`truneg_fairseq.checkpoints.load_for_inference` (the plugin's one
loading path: the same checks and one-line errors as every script). The interface is fairseq's
:class:`~fairseq.models.roberta.RobertaHubInterface` (``encode``, ``decode``,
``extract_features``, ``predict`` for RoBERTa-family models); :meth:`TrunegHubInterface.fill_mask`
also serves ELECTRA (its generator) and gives WordPiece predictions as words: a ``<mask>`` with
a space (or nothing) before it stands for a whole word, so only word-start pieces fill it (a
``##`` continuation glued onto the word before, "house" + "##r" -> "houser", is no answer to
"the house <mask> the lake"); a ``<mask>`` written against the word before it ("house<mask>")
asks for the rest of that word, and a ``##`` piece is glued on without its ``##``.

The tokenizer for ``encode``/``fill_mask``, first found first: ``bpe=`` (a fairseq BPE config, or
its name with fairseq-style keywords: ``bpe="sentencepiece", sentencepiece_model=...``,
``bpe="wordpiece", wordpiece_vocab=...``) or ``vocab=`` (a WordPiece vocab.txt); the
checkpoint's own BPE config; a vocab.txt beside the checkpoint or in the data directory (as
``convert_hf.py import`` writes it), lower-cased as the import recorded (import.json) unless
``lowercase=`` says otherwise; the tokenizer that ``prepare_corpus.py`` recorded in the data
directory (``tokenizer_fingerprint.json``: sentencepiece, GPT-2 BPE, WordPiece, or whitespace
words, as the demo's and the study's checkpoints have).

Nothing is fetched, whatever the checkpoint's BPE or tokenizer config says or leaves out: a BPE
config that names a URL, leaves out a file where fairseq would fetch a default (GPT-2's files,
BERT's vocabulary) or names a file that is not there is one error naming the field and the files
to give (:mod:`truneg_fairseq.checkpoint_schema.encoder_files`), before it is built; with
``vocab=`` the checkpoint's own BPE is not built at all, and its tokenizer never is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional, Tuple

import torch
from fairseq.models.roberta import RobertaHubInterface

from truneg_fairseq.checkpoints import CheckpointError, load_for_inference
from truneg_fairseq.text.wordpiece import WORDPIECE_CONT

MASK = "<mask>"


def mask_is_whole_word(masked_input: str) -> bool:
    """Whether the ``<mask>`` of ``masked_input`` stands for a whole word: nothing or a space
    before it ("house <mask> near"), not a word it continues ("house<mask> near")."""
    before = masked_input.split(MASK, 1)[0]
    return not before or before[-1].isspace()


def fill_wordpiece(masked_input: str, piece: str) -> str:
    """``masked_input`` with its ``<mask>`` replaced by the WordPiece ``piece``: a word-start
    piece as a word of its own ("house <mask> near" + "at" -> "house at near", "house<mask>" +
    "at" -> "house at"), a ``##`` piece glued to the word the mask is written against
    ("house<mask>" + "##s" -> "houses"); a ``##`` piece in the place of a whole word is shown as
    the piece it is ("house <mask>" + "##s" -> "house ##s")."""
    before, after = masked_input.split(MASK, 1)
    if piece.startswith(WORDPIECE_CONT) and not mask_is_whole_word(masked_input):
        return before + piece[len(WORDPIECE_CONT) :] + after
    if before and not before[-1].isspace():
        before += " "
    return before + piece + after


class TrunegHubInterface(RobertaHubInterface):
    """fairseq's RoBERTa hub interface over a model loaded by the plugin; :meth:`fill_mask`
    asks the masked-LM head only (every family, ELECTRA's generator included) and decodes
    WordPiece predictions into words."""

    def fill_mask(self, masked_input: str, topk: int = 5) -> List[Tuple[str, float, str]]:
        """The ``topk`` most likely fillings of the one ``<mask>`` of ``masked_input``: (filled
        text, probability, predicted entry) as fairseq's ``fill_mask`` gives them; on a WordPiece
        model a ``<mask>`` with a space before it is filled with whole words only
        (:func:`fill_wordpiece`)."""
        if masked_input.count(MASK) != 1:
            raise ValueError(f"fill_mask needs exactly one {MASK} in its input: {masked_input!r}")
        if self.bpe is None:
            raise CheckpointError(
                "this model has no tokenizer to encode text (no BPE in its config, no vocab.txt "
                "or tokenizer_fingerprint.json in its data directory): give "
                "from_pretrained(..., vocab=) the WordPiece vocab.txt of its dictionary (or bpe= "
                "a fairseq BPE config)"
            )
        d = self.task.source_dictionary
        spans = [self.bpe.encode(s.strip()) for s in masked_input.split(MASK)]
        line = f" {MASK} ".join(spans).strip()
        tokens = d.encode_line(f"<s> {line} </s>", append_eos=False, add_if_not_exist=False)
        tokens = tokens.long().unsqueeze(0).to(self.device)
        masked = tokens.eq(d.index(MASK))
        with torch.no_grad():
            self.model.eval()
            logits = self.model(tokens, masked_tokens=masked)[0]  # 1 x V
        prob = logits.float().softmax(dim=-1).view(-1)
        allowed = len(prob)
        if self._wordpiece and mask_is_whole_word(masked_input):
            # a whole word: no continuation piece (the model's probabilities, not renormalised)
            continuations = self._continuations(len(prob))
            prob = prob.masked_fill(continuations, -1.0)
            allowed -= int(continuations.sum())
        values, index = prob.topk(k=min(topk, allowed))
        out = []
        for p, i in zip(values.tolist(), index.tolist()):
            piece = d[i]
            if self._wordpiece:
                text = fill_wordpiece(masked_input, piece)
            else:
                word = self.bpe.decode(piece)
                text = masked_input.replace(MASK, word)
            out.append((text, p, piece))
        return out

    def _continuations(self, size: int) -> torch.Tensor:
        """Boolean (``size``,): which dictionary entries are ``##`` continuation pieces."""
        symbols = self.task.source_dictionary.symbols
        flags = [i < len(symbols) and symbols[i].startswith(WORDPIECE_CONT) for i in range(size)]
        return torch.tensor(flags, device=self.device)

    @property
    def _wordpiece(self) -> bool:
        from truneg_fairseq.text.fairseq_bpe import WordPieceBPE

        return isinstance(self.bpe, WordPieceBPE)


def _wordpiece_bpe(vocab: Path, lowercase: Optional[bool]):
    from truneg_fairseq.text.fairseq_bpe import WordPieceBPE, WordPieceBPEConfig

    if lowercase is None:
        info = vocab.parent / "import.json"
        recorded = json.loads(info.read_text()).get("lowercase") if info.is_file() else None
        lowercase = recorded
    flag = "auto" if lowercase is None else ("yes" if lowercase else "no")
    return WordPieceBPE(WordPieceBPEConfig(wordpiece_vocab=str(vocab), wordpiece_lowercase=flag))


def _local_encoder_files(cfg, checkpoint: Path, given: bool) -> None:
    """The BPE config the hub builds (the checkpoint's ``bpe``, or ``bpe=``) must read local
    files only: a URL, a file left out where fairseq would fetch a default (GPT-2's, BERT's) or a
    missing file is one error naming the field and the file to give
    (:mod:`truneg_fairseq.checkpoint_schema.encoder_files`); nothing is downloaded. The
    checkpoint's ``tokenizer`` is never built here (fairseq's RoBERTa interface encodes with the
    BPE alone), so whatever it says reaches nothing."""
    from truneg_fairseq.checkpoint_schema.encoder_files import check_local_encoder

    section = cfg.get("bpe", None) if hasattr(cfg, "get") else getattr(cfg, "bpe", None)
    where = "from_pretrained(bpe=...)" if given else str(checkpoint)
    fix = "from_pretrained(..., {config}), or vocab= a WordPiece vocab.txt"
    check_local_encoder(section, "bpe", where, fix)


def _hub_interface(cfg, task, model, checkpoint: Path, given: bool) -> "TrunegHubInterface":
    """fairseq's hub interface over ``model``, which builds ``cfg.bpe`` (checked by
    :func:`_local_encoder_files`): a BPE whose package is not installed, or whose files are not
    what it reads, is one error naming it."""
    try:
        return TrunegHubInterface(cfg, task, model)
    except (ImportError, OSError, RuntimeError, ValueError) as e:
        where = "from_pretrained(bpe=...)" if given else str(checkpoint)
        name = cfg.bpe.get("_name", None) if hasattr(cfg.bpe, "get") else cfg.bpe
        first = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
        raise CheckpointError(
            f"{where}: the {name} BPE of its config cannot be built ({first}); give another with "
            "from_pretrained(..., bpe=...) or vocab= a WordPiece vocab.txt"
        ) from None


class WhitespaceBPE:
    """The BPE of a whitespace-tokenized dictionary (the demo's and the study's word-level data):
    every word is one entry."""

    def encode(self, x: str) -> str:
        return " ".join(x.split())

    def decode(self, x: str) -> str:
        return x

    def is_beginning_of_word(self, x: str) -> bool:
        return True


def _recorded_bpe(data: Path):
    """The BPE of the tokenizer recorded in ``data``'s ``tokenizer_fingerprint.json`` (None when
    there is no record)."""
    from fairseq.data import encoders

    from truneg_fairseq.text.record import RECORD_NAME, spec_from_record
    from truneg_fairseq.text.spec import TokenizerError
    from truneg_fairseq.text.tokenizers import build_tokenizer

    try:
        spec = spec_from_record(data)
        if spec is None:
            return None
        if spec.kind == "whitespace":
            return WhitespaceBPE()
        return encoders.build_bpe(build_tokenizer(spec).bpe_args())
    except TokenizerError as e:
        raise CheckpointError(
            f"{data / RECORD_NAME}: the recorded tokenizer cannot be built ({e}); give "
            "from_pretrained(..., vocab=) or bpe= the tokenizer of this dictionary"
        ) from None


def _bpe_config(bpe, overrides: dict) -> Optional[dict]:
    """``bpe`` as a config dict; fairseq-style keywords of that BPE (``bpe="sentencepiece",
    sentencepiece_model=...``, ``bpe="wordpiece", wordpiece_vocab=...``) are taken out of
    ``overrides`` into it."""
    if bpe is None:
        return None
    cfg = {"_name": bpe} if isinstance(bpe, str) else dict(bpe)
    name = cfg.get("_name")
    for key in [k for k in overrides if name and k.startswith(f"{name}_")]:
        cfg[key] = overrides.pop(key)
    return cfg


def from_pretrained(
    model_name_or_path,
    checkpoint_file: str = "model.pt",
    data_name_or_path: str = ".",
    bpe=None,
    vocab: Optional[str] = None,
    lowercase: Optional[bool] = None,
    **overrides,
) -> TrunegHubInterface:
    """The hub interface of ``model_name_or_path/checkpoint_file`` (a local directory: nothing
    is downloaded), its dictionary from ``data_name_or_path`` (relative to the directory; "."
    for an import directory). ``bpe``: a fairseq BPE config, its name or a dict of its fields
    (``{"_name": "sentencepiece", "sentencepiece_model": "spm.model"}``; default: the
    checkpoint's own, else WordPiece when a vocab.txt is found); ``vocab``:
    WordPiece vocab.txt; ``overrides``: checkpoint config fields (as fairseq's
    ``arg_overrides``). Errors are :class:`CheckpointError` naming the file."""
    root = Path(model_name_or_path)
    if not root.is_dir():
        raise CheckpointError(
            f"{model_name_or_path} is not a directory: give the directory that holds "
            f"{checkpoint_file} (hub names are not downloaded)"
        )
    data = Path(data_name_or_path)
    data = data if data.is_absolute() else root / data
    overrides = dict(overrides)
    bpe = _bpe_config(bpe, overrides)
    models, cfg, task = load_for_inference(
        root / checkpoint_file, str(data), overrides, flag="data_name_or_path"
    )
    found = [Path(vocab)] if vocab else [root / "vocab.txt", data / "vocab.txt"]
    found = [p for p in found if p.is_file()]
    if vocab and not found:
        raise CheckpointError(f"vocab {vocab} not found")
    if bpe is not None or vocab:
        from omegaconf import open_dict

        with open_dict(cfg):
            cfg.bpe = bpe  # vocab= alone: the WordPiece below, the checkpoint's own not built
    _local_encoder_files(cfg, root / checkpoint_file, given=bpe is not None)
    hub = _hub_interface(cfg, task, models[0], root / checkpoint_file, given=bpe is not None)
    if found and (vocab or hub.bpe is None):
        hub.bpe = _wordpiece_bpe(found[0], lowercase)
    if hub.bpe is None:
        hub.bpe = _recorded_bpe(data)
    return hub.eval()
