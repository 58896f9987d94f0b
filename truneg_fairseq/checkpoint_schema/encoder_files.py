"""The files a BPE or tokenizer config read from a file makes fairseq open, checked before
anything is built from it (:func:`check_local_encoder`), so that loading a local checkpoint never
fetches anything, whatever its ``bpe``/``tokenizer`` config says or leaves out.

fairseq's BPE constructors read their files through ``fairseq.file_utils.cached_path``, which
downloads a URL (``http``, ``https``, ``s3``; other schemes through fairseq's path manager), and
two of them fetch when a file is left out: ``gpt2``'s defaults are URLs of fairseq's server, and
``bert`` without ``bpe_vocab_file`` asks the HuggingFace hub for ``bert-base-uncased``.
:data:`FILE_FIELDS` lists every BPE and tokenizer fairseq registers, and the plugin's
``wordpiece``, with the config fields each reads a file from (tests/test_hub.py fails when
fairseq or the plugin registers one that is not here). A config is refused, with one
:class:`~truneg_fairseq.errors.CheckpointError` naming the field and the file to give, when:

* its name is one this module does not know (a name registered by other code may fetch);
* any of its values is a URL or a name a fetch would resolve;
* a file field is left out, unset or names no local file (fairseq would fetch the default, or
  fail with a bare ``OSError`` after the load)."""

from __future__ import annotations

import argparse
import dataclasses
import os
from urllib.parse import urlparse

from truneg_fairseq.errors import CheckpointError

from .model_values import is_url

# {kind: {name: the config fields its constructor reads a file from}}
FILE_FIELDS = {
    "bpe": {
        "gpt2": ("gpt2_encoder_json", "gpt2_vocab_bpe"),  # defaults: URLs of fairseq's server
        "sentencepiece": ("sentencepiece_model",),
        "byte_bpe": ("sentencepiece_model_path",),
        "fastbpe": ("bpe_codes",),
        "subword_nmt": ("bpe_codes",),
        "hf_byte_bpe": ("bpe_vocab", "bpe_merges"),
        "bert": ("bpe_vocab_file",),  # left out: BertTokenizer.from_pretrained of a hub name
        "wordpiece": ("wordpiece_vocab",),  # the plugin's own
        "bytes": (),
        "characters": (),
    },
    "tokenizer": {
        "moses": (),  # sacremoses reads the data it ships with
        "nltk": (),  # nltk's data is never downloaded by its tokenizer
        "space": (),
    },
}
_UNSET = (None, "", "???")
_FETCHED_SCHEMES = ("http", "https", "s3")  # fairseq's cached_path downloads these first


def fetches(value) -> bool:
    """Whether string ``value`` would be fetched rather than read as a local file: a URL, or a
    name with a scheme (``s3:bucket/key``) that is not a local file."""
    if not isinstance(value, str):
        return False
    text = value.strip()
    scheme = urlparse(text).scheme.lower()
    return (
        is_url(text) or scheme in _FETCHED_SCHEMES or (len(scheme) > 1 and not os.path.exists(text))
    )


def _name_and_values(section, kind: str):
    """(name, {field: value}) of encoder config ``section``: a DictConfig or dict with
    ``_name``, or a flat argument namespace naming it as ``bpe``/``tokenizer``."""
    if isinstance(section, str):
        return section, {}
    if isinstance(section, argparse.Namespace):
        values = dict(vars(section))
        return values.get("_name") or values.get(kind), values
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(section):
            section = OmegaConf.to_container(section, resolve=False)
    except ImportError:  # pragma: no cover - fairseq needs omegaconf
        pass
    values = dict(section) if isinstance(section, dict) else {}
    return values.get("_name"), values


def _defaults(kind: str, name: str) -> dict:
    from fairseq.registry import REGISTRIES

    dc = REGISTRIES[kind]["dataclass_registry"].get(name)
    if dc is None:
        return {}
    out = {}
    for f in dataclasses.fields(dc):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def example(kind: str, name: str) -> str:
    """The config of ``name`` with its files to give, as ``from_pretrained`` takes it."""
    files = ", ".join(f"{field!r}: FILE" for field in FILE_FIELDS[kind].get(name, ()))
    return f"{kind}={{'_name': {name!r}{', ' + files if files else ''}}}"


def check_local_encoder(section, kind: str, where: str, fix: str) -> None:
    """Refuse encoder config ``section`` (``kind``: ``"bpe"`` or ``"tokenizer"``) read from
    ``where`` (a checkpoint, or the caller's argument) unless what it builds reads local files
    only (see the module docstring). ``fix``: how the caller gives another config, with
    ``{config}`` where an example of one goes."""
    if section is None:
        return
    name, values = _name_and_values(section, kind)
    if not name:
        return
    known = FILE_FIELDS[kind]
    if name not in known:
        from fairseq.registry import REGISTRIES

        registered = name in REGISTRIES[kind]["registry"]
        why = (
            "a name registered by other code, whose files this loader cannot check"
            if registered
            else f"which names no {kind} fairseq registers"
        )
        raise CheckpointError(
            f"{where}: {kind} is {str(name)[:80]!r}, {why} (it builds {', '.join(sorted(known))}); "
            f"nothing was built. {fix.format(config=f'{kind}=...')}"
        )
    said = fix.format(config=example(kind, name))
    files = known[name]
    defaults = _defaults(kind, name)
    for key in sorted(k for k in values if k in set(defaults) | set(files)):
        value = values[key]
        if (fetches(value) if key in files else is_url(value)) and value not in _UNSET:
            raise CheckpointError(
                f"{where}: {kind}.{key} = {str(value)[:80]!r} is a URL; nothing is downloaded "
                f"here. Download the file yourself and give its local path: {said}"
            )
    for field in files:
        if field not in values or values[field] in _UNSET:
            default = defaults.get(field)
            then = (
                f", and fairseq would download its default, {default}"
                if fetches(default)
                else ", and fairseq would ask the HuggingFace hub for BERT's vocabulary"
                if name == "bert"
                else ""
            )
            raise CheckpointError(
                f"{where}: {kind}.{field} is not given{then}; nothing is downloaded here. Give "
                f"the {name} files: {said}"
            )
        value = values[field]
        if not isinstance(value, str) or not os.path.isfile(value):
            raise CheckpointError(
                f"{where}: {kind}.{field} = {str(value)[:120]!r}: no such file (the {name} "
                f"{kind} reads it). Give the {name} files: {said}"
            )
