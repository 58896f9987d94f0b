"""Import (:func:`import_hf`): a local HuggingFace BERT or ELECTRA directory written as
``OUT_DIR/model.pt`` (a fairseq checkpoint with its config), ``OUT_DIR/dict.txt``,
``OUT_DIR/vocab.txt`` and ``OUT_DIR/import.json``, all at once or not at all, so that a failed
conversion never leaves a directory that looks imported."""

import json
import logging
import shutil
from pathlib import Path

import torch

from truneg_fairseq.convert.build import save_fresh_checkpoint
from truneg_fairseq.convert.hf_dir import BERT_ARCHS, ELECTRA_ARCHS, GENERATOR_ARCHS, read_hf_dir
from truneg_fairseq.convert.import_bert import _bert_sizes, _import_bert, untied_decoder
from truneg_fairseq.convert.import_electra import _electra_sizes, _import_electra
from truneg_fairseq.convert.keys import BERT_MLM_HEAD, _has
from truneg_fairseq.errors import ConversionError
from truneg_fairseq.outputs import atomic_dir
from truneg_fairseq.text import dict_lines_of

logger = logging.getLogger(__name__)


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def import_hf(
    hf_dir, out_dir, generator_dir=None, allow_unshared_embeddings: bool = False, seed: int = 1
) -> Path:
    """Convert a local HF directory to ``out_dir`` (model.pt, dict.txt, vocab.txt, import.json
    and the tokenizer files found). Nothing is written unless the whole conversion succeeds.
    ``import.json`` records the source, the fairseq model fields (``model_args``: what
    ``--bert-sizes-from``/``--electra-sizes-from`` read) and whether the masked-LM head was
    imported or started fresh from ``seed``."""
    ck = read_hf_dir(hf_dir)
    gen = None
    if generator_dir is not None:
        if ck.arch not in ELECTRA_ARCHS:
            raise ConversionError(
                f"--generator is for ElectraForPreTraining; {ck.path} holds {ck.arch}"
            )
        gen = read_hf_dir(generator_dir, "--generator", GENERATOR_ARCHS, need_vocab=False)
    out_dir = Path(out_dir).resolve()
    inputs = {"HF_DIR": hf_dir, "--generator": generator_dir}  # kept, even inside OUT_DIR
    with atomic_dir(out_dir, "convert_hf.py import", inputs=inputs) as work:
        with open(work / "dict.txt", "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in dict_lines_of(ck.vocab)))
        with open(work / "vocab.txt", "w", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in ck.vocab))
        for name in TOKENIZER_FILES:
            if (ck.path / name).is_file():
                shutil.copyfile(ck.path / name, work / name)
        with torch.no_grad():
            if ck.arch in BERT_ARCHS:
                cfg, model = _import_bert(ck, work, seed)
                head = "imported" if _has(ck.state, BERT_MLM_HEAD) else f"fresh (seed {seed})"
                sizes = _bert_sizes(ck.config, cfg.model.max_positions, untied_decoder(ck))
            else:
                cfg, model = _import_electra(ck, gen, work, allow_unshared_embeddings)
                head = (
                    "imported"
                    if gen is not None
                    else "none (discriminator only: pre-training adds a fresh generator)"
                )
                sizes = _electra_sizes(
                    ck.config, gen.config if gen else None, cfg.model.electra_max_positions
                )
        cfg.task.data = str(out_dir)  # where dict.txt will be once the directory is in place
        save_fresh_checkpoint(work / "model.pt", cfg, model)
        sizes.pop("tokens_per_sample")  # a task field; the recipes read max_positions
        info = {
            "source": str(ck.path),
            "architecture": ck.arch,
            "generator": str(gen.path) if gen else None,
            "lowercase": ck.lowercase,
            "fairseq_arch": cfg.model._name,
            "mlm_head": head,
            "model_args": sizes,
        }
        with open(work / "import.json", "w", encoding="utf-8") as f:
            json.dump(info, f, indent=2)
    logger.info(f"imported {ck.arch} from {ck.path} into {out_dir} (model.pt, dict.txt, vocab.txt)")
    return out_dir
