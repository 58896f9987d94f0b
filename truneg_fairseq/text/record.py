"""The record next to ``dict.txt`` (``tokenizer_fingerprint.json``): which tokenizer and which
file contents made the dictionary, written by ``prepare_corpus.py`` and checked by every later
step that encodes text for it."""

import hashlib
import json
import os
from pathlib import Path
from typing import Optional

from truneg_fairseq.outputs import atomic_open
from truneg_fairseq.text.spec import (
    FILES,
    KINDS,
    RECORD_NAME,
    RECORD_VERSION,
    TokenizerError,
    TokenizerSpec,
)


def content_digest(path) -> str:
    """sha256 of what a tokenizer file says, not of its bytes: a sentencepiece model's pieces,
    scores, types and normalisation rules (its trainer section, which records the input paths
    and the training process, is left out, so two identical trainings agree); a JSON file's
    parsed content; a text file's lines without their line endings (a CRLF copy agrees)."""
    path = Path(path)
    h = hashlib.sha256()
    if path.suffix == ".model":
        from sentencepiece import sentencepiece_model_pb2

        proto = sentencepiece_model_pb2.ModelProto()
        try:
            proto.ParseFromString(path.read_bytes())
        except Exception:  # not a model proto: its bytes identify it
            h.update(path.read_bytes())
            return h.hexdigest()
        for piece in proto.pieces:
            h.update(f"{piece.piece}\t{piece.score!r}\t{piece.type}\n".encode("utf-8"))
        h.update(proto.normalizer_spec.SerializeToString(deterministic=True))
        h.update(proto.denormalizer_spec.SerializeToString(deterministic=True))
        return h.hexdigest()
    data = path.read_bytes()
    if path.suffix == ".json":
        try:
            h.update(
                json.dumps(
                    json.loads(data.decode("utf-8")), sort_keys=True, ensure_ascii=False
                ).encode("utf-8")
            )
            return h.hexdigest()
        except (ValueError, UnicodeDecodeError):
            pass
    lines = data.replace(b"\r\n", b"\n").split(b"\n")
    while lines and not lines[-1]:
        lines.pop()
    h.update(b"\n".join(lines))
    return h.hexdigest()


def _byte_digest(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_record(
    data_dir, tokenizer, moved_from: Optional[str] = None, moved_to: Optional[str] = None
) -> Path:
    """Write ``DATA/tokenizer_fingerprint.json`` (atomically): the tokenizer's kind, its files
    (absolute paths and the sha256 of their contents, :func:`content_digest`), lower-casing and
    fingerprint, so later steps can check they use
    the tokenizer that made ``DATA/dict.txt``, and whole-word masking can find it. Files written
    in a staging directory ``moved_from`` are recorded at their final place under ``moved_to``."""
    digests = tokenizer.file_fingerprints()

    def final(path: str) -> str:
        path = os.path.abspath(path)
        if moved_from and os.path.commonpath(
            [path, os.path.abspath(moved_from)]
        ) == os.path.abspath(moved_from):
            return os.path.join(os.path.abspath(moved_to), os.path.relpath(path, moved_from))
        return path

    rec = {
        "format_version": RECORD_VERSION,
        "tokenizer": tokenizer.kind,
        "fingerprint": tokenizer.fingerprint(),
        "files": {
            k: {"path": final(v), "sha256": digests[k], "digest": "content"}
            for k, v in tokenizer.spec.files().items()
        },
    }
    if tokenizer.kind == "wordpiece":
        rec["lowercase"] = tokenizer.lowercase
    path = Path(data_dir) / RECORD_NAME
    with atomic_open(path, "w", encoding="utf-8") as f:
        json.dump(rec, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def read_record(data_dir) -> Optional[dict]:
    """The record of ``data_dir`` (None when it has none)."""
    path = Path(data_dir) / RECORD_NAME
    if not path.is_file():
        return None
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TokenizerError(
            f"{path} cannot be read ({e}); delete it or prepare the data again"
        ) from None
    ok = (
        isinstance(rec, dict)
        and rec.get("format_version") == RECORD_VERSION
        and rec.get("tokenizer") in KINDS
        and isinstance(rec.get("files"), dict)
        and all(
            isinstance(f, dict) and "path" in f and "sha256" in f for f in rec["files"].values()
        )
    )
    if not ok:
        raise TokenizerError(
            f"{path} is not a tokenizer record written by prepare_corpus.py; delete it or "
            "prepare the data again"
        )
    from truneg_fairseq.checkpoint_schema.model_values import is_url

    for key, f in rec["files"].items():  # the files a tokenizer is built from: local ones only
        if not isinstance(f["path"], str) or is_url(f["path"]) or "\n" in f["path"]:
            raise TokenizerError(
                f"{path}: files.{key}.path = {str(f['path'])[:80]!r} is not a local file path "
                "(nothing is downloaded); delete the record or prepare the data again"
            )
    return rec


def spec_from_record(data_dir, flag_prefix: str = "--") -> Optional[TokenizerSpec]:
    """The tokenizer recorded for ``data_dir`` (None when there is no record)."""
    rec = read_record(data_dir)
    if rec is None:
        return None
    files = {k: f["path"] for k, f in rec["files"].items()}
    return TokenizerSpec(
        rec["tokenizer"],
        files.get("spm_model"),
        files.get("gpt2_encoder_json"),
        files.get("gpt2_vocab_bpe"),
        files.get("vocab"),
        rec.get("lowercase"),
        flag_prefix,
    )


def check_record(dict_path, tokenizer) -> None:
    """Raise unless the record next to ``dict_path`` (if any) names this tokenizer: the same
    kind, the same bytes for every file both name, the same WordPiece lower-casing."""
    folder = Path(dict_path).parent
    rec = read_record(folder)
    if rec is None:
        return
    record = folder / RECORD_NAME
    recorded = ", ".join(f["path"] for f in rec["files"].values()) or "no file"
    fix = (
        f"; pass the tokenizer files that prepared {dict_path} ({recorded}), or prepare the data again "
        "with these (scripts/prepare_corpus.py)"
    )
    if rec["tokenizer"] != tokenizer.kind:
        raise TokenizerError(
            f"{dict_path} was made with --tokenizer {rec['tokenizer']} (as {record} says), "
            f"not --tokenizer {tokenizer.kind}" + fix
        )
    given = tokenizer.file_fingerprints()
    for attr, digest in given.items():
        want = rec["files"].get(attr)
        if want is not None and want.get("digest") != "content":  # a record of the files' bytes
            digest = _byte_digest(tokenizer.spec.files()[attr])
        if want is not None and want["sha256"] != digest:
            flag = next(fl for a, fl, _ in FILES[tokenizer.kind] if a == attr)
            raise TokenizerError(
                f"{tokenizer.spec.flag(flag)} {tokenizer.spec.files()[attr]} is not the file that made {dict_path}: "
                f"{record} records {want['path']} (sha256 {want['sha256'][:12]}, this one {digest[:12]})"
                + fix
            )
    if (
        tokenizer.kind == "wordpiece"
        and rec.get("lowercase") is not None
        and rec["lowercase"] != tokenizer.lowercase
    ):
        raise TokenizerError(
            f"{dict_path} was made with lowercase={rec['lowercase']} (as {record} says), this "
            f"tokenizer has lowercase={tokenizer.lowercase}: pass --lowercase "
            f"{'yes' if rec['lowercase'] else 'no'}"
        )
