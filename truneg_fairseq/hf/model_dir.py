"""What a model directory given to ``truneg-hf-train`` must be, said before any work: a local
``save_pretrained`` directory (nothing is downloaded at run time), whose WordPiece vocabulary,
when it has one, holds ``##`` continuation pieces. Files are read as text: the checks run
before any model or tokenizer is loaded."""

import json
import re
from pathlib import Path
from typing import List, Optional

from truneg_fairseq.text.marks import word_marks

OFFLINE_DOC = 'docs/hf.md, "A model directory, offline"'
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def not_local_message(path: str, flag: str) -> str:
    """The message for a ``path`` that is no local directory: a hub id is not downloaded; how
    to make the directory with network access, and without."""
    message = f"{flag} {path} is not a local model directory"
    if Path(path).exists() or not HUB_ID.fullmatch(path):
        return message
    return (
        f"{message}; if it is a HuggingFace hub id, nothing is downloaded at run time: make the "
        'directory on a machine with network access, `python -c "from transformers import '
        f"AutoModelForMaskedLM, AutoTokenizer; AutoModelForMaskedLM.from_pretrained('{path}')"
        f".save_pretrained('DIR'); AutoTokenizer.from_pretrained('{path}').save_pretrained('DIR')\"` "
        f"or `hf download {path} --local-dir DIR`, copy DIR here and give it; offline, export a "
        "checkpoint of this project (truneg-convert-hf export CHECKPOINT DIR) or build a model "
        f"with transformers and a vocabulary trained with tokenizers ({OFFLINE_DOC})"
    )


def _wordpiece_entries(model_dir: Path) -> Optional[List[str]]:
    """The entries of the directory's WordPiece vocabulary (None when its tokenizer is no
    WordPiece): tokenizer.json's model when there is one, else vocab.txt (which only WordPiece
    tokenizers read)."""
    tj = model_dir / "tokenizer.json"
    if tj.is_file():
        try:
            model = json.loads(tj.read_text(encoding="utf-8")).get("model") or {}
        except (ValueError, UnicodeDecodeError, AttributeError):
            return None  # transformers reports a broken tokenizer.json when it loads it
        if model.get("type") != "WordPiece" or not isinstance(model.get("vocab"), dict):
            return None
        return list(model["vocab"])
    vt = model_dir / "vocab.txt"
    if not vt.is_file():
        return None
    try:
        return vt.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        return None


def wordpiece_problem(model_dir: Path) -> Optional[str]:
    """The message for a WordPiece vocabulary without ``##`` continuation pieces (a hand-made
    list of whole words), else None. Such a vocabulary reads every word it lacks as ``[UNK]``,
    and no synonym table can tell its words from pieces."""
    entries = _wordpiece_entries(model_dir)
    if not entries or word_marks(entries)[1]["wordpiece"]:
        return None
    where = model_dir / (
        "tokenizer.json" if (model_dir / "tokenizer.json").is_file() else "vocab.txt"
    )
    return (
        f"{where} is a WordPiece vocabulary without any '##' continuation pieces: WordPiece needs "
        "them (without them every word the list lacks reads as [UNK], and no synonym table can "
        "tell words from pieces). Give the model's own vocabulary, or train one with tokenizers: "
        "`tokenizers.BertWordPieceTokenizer().train([TEXT], vocab_size=N)` then "
        f"`.save_model(DIR)` ({OFFLINE_DOC})"
    )
