"""Tiny random HuggingFace BERT/ELECTRA directories (built with ``transformers``, saved locally)
and a WordPiece vocabulary over the words of the tiny test corpus."""

import re
from pathlib import Path
from typing import List

import torch
from corpus_fixtures import tiny_corpus_lines

SPECIALS = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def wordpiece_vocab() -> List[str]:
    """BERT-like layout (specials at the front, [PAD] = 0) over the corpus words, plus a few
    continuation pieces so that rare words split."""
    words = sorted({w for line in tiny_corpus_lines() for w in line.split()})
    letters = "bcdfgklmnprstvz" + "aeiou"
    pieces = [f"##{c}" for c in letters] + list(letters)
    return SPECIALS + words + [p for p in pieces if p not in words]


def write_vocab(hf_dir: Path, vocab: List[str]) -> None:
    (Path(hf_dir) / "vocab.txt").write_text("".join(t + "\n" for t in vocab))


def _randomize(model, seed: int) -> None:
    """Move every tensor off its initial value (LayerNorm 1/0, zero biases), so a mix-up of
    weight and bias, or of two tensors, shows in the outputs."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.05)


def bert_config(vocab_size: int, **kw):
    from transformers import BertConfig

    args = dict(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    args.update(kw)
    return BertConfig(**args)


def save_bert(
    hf_dir: Path,
    cls_name: str = "BertForMaskedLM",
    safe: bool = True,
    seed: int = 0,
    vocab=None,
    **config,
):
    """A tiny random ``cls_name`` saved in ``hf_dir`` (``config``: BertConfig values)."""
    import transformers

    vocab = vocab or wordpiece_vocab()
    torch.manual_seed(seed)
    model = getattr(transformers, cls_name)(bert_config(len(vocab), **config)).eval()
    _randomize(model, seed)
    model.save_pretrained(str(hf_dir), safe_serialization=safe)
    if not safe and (Path(hf_dir) / "model.safetensors").is_file():
        # transformers 5 writes safetensors whatever it is asked; write the legacy .bin as the
        # published BERT checkpoints have it: torch.save'd, LayerNorm tensors named gamma/beta
        (Path(hf_dir) / "model.safetensors").unlink()
        state = {
            re.sub(
                r"LayerNorm\.weight$",
                "LayerNorm.gamma",
                re.sub(r"LayerNorm\.bias$", "LayerNorm.beta", k),
            ): v
            for k, v in model.state_dict().items()
        }
        torch.save(state, Path(hf_dir) / "pytorch_model.bin")
    write_vocab(hf_dir, vocab)
    return model


def tiny_bert_and_texts(root: Path) -> Path:
    """``root/bert``: a BERT masked-LM directory without dropout (runs compare weight for
    weight); ``root/texts/{a,b}.txt`` (100 lines, one empty) and ``root/valid.txt``."""
    import transformers

    vocab = wordpiece_vocab()
    torch.manual_seed(0)
    cfg = bert_config(len(vocab), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    transformers.BertForMaskedLM(cfg).save_pretrained(str(root / "bert"))
    write_vocab(root / "bert", vocab)
    lines = tiny_corpus_lines(120, seed=4)
    (root / "texts").mkdir()
    (root / "texts" / "a.txt").write_text("\n".join(lines[:50]) + "\n\n")
    (root / "texts" / "b.txt").write_text("\n".join(lines[50:100]) + "\n")
    (root / "valid.txt").write_text("\n".join(lines[100:]) + "\n")
    return root


def save_electra_pair(
    disc_dir: Path, gen_dir: Path, seed: int = 0, vocab=None, gen_embedding_size: int = 16
):
    from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

    vocab = vocab or wordpiece_vocab()
    torch.manual_seed(seed)
    common = dict(vocab_size=len(vocab), max_position_embeddings=64)
    disc = ElectraForPreTraining(
        ElectraConfig(
            embedding_size=16,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            **common,
        )
    ).eval()
    gen = ElectraForMaskedLM(
        ElectraConfig(
            embedding_size=gen_embedding_size,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=1,
            intermediate_size=32,
            **common,
        )
    ).eval()
    _randomize(disc, seed)
    _randomize(gen, seed + 1)
    if gen_embedding_size == 16:
        # the published pair shares its embeddings, as the plugin's ELECTRA does
        gen.electra.embeddings.load_state_dict(disc.electra.embeddings.state_dict())
    disc.save_pretrained(str(disc_dir))
    gen.save_pretrained(str(gen_dir))
    write_vocab(disc_dir, vocab)
    write_vocab(gen_dir, vocab)
    return disc, gen


def padded_batch(vocab: List[str], lengths=(20, 13, 6), seed: int = 0):
    """HF ids B x T ([CLS] ... [SEP] then [PAD]) and the attention mask."""
    g = torch.Generator().manual_seed(seed)
    T = max(lengths)
    ids = torch.randint(len(SPECIALS), len(vocab), (len(lengths), T), generator=g)
    mask = torch.zeros_like(ids)
    for b, n in enumerate(lengths):
        ids[b, 0] = vocab.index("[CLS]")
        ids[b, n - 1] = vocab.index("[SEP]")
        ids[b, n:] = vocab.index("[PAD]")
        mask[b, :n] = 1
    return ids, mask


def to_fairseq_ids(ids: torch.Tensor, vocab: List[str]) -> torch.Tensor:
    """HF ids -> fairseq rows of the imported dictionary."""
    from truneg_fairseq.text import wordpiece_row_order

    order = torch.tensor(wordpiece_row_order(vocab))
    inv = torch.empty_like(order)
    inv[order] = torch.arange(len(order))
    return inv[ids]


def saved_weights(path: Path) -> dict:
    """The tensors of ``path``/model.safetensors (a save_pretrained or Trainer checkpoint folder)."""
    from safetensors.torch import load_file

    return load_file(str(Path(path) / "model.safetensors"))
