"""What an ELECTRA model is configured with: its fairseq fields (:class:`ElectraConfig`) and the
filling of the sizes a command line or config left unset (:func:`electra_sizes`: an import's
``import.json`` first, then a row of :data:`~truneg_fairseq.models.sizes.ELECTRA_SIZES`, the one
table of sizes, importable from here too).
"""

from dataclasses import dataclass, field
from typing import Optional

from fairseq import utils
from fairseq.dataclass import ChoiceEnum, FairseqDataclass

from truneg_fairseq.models import embed_init, import_sizes
from truneg_fairseq.models.sizes import ELECTRA_SIZES, ElectraSize  # noqa: F401  (importable here)

# what --electra-sizes-from takes from an import (dropout and the discriminator-only switch stay
# the command line's)
IMPORTED_SIZES = (
    "electra_embed_dim",
    "electra_hidden_dim",
    "electra_layers",
    "electra_heads",
    "electra_ffn_dim",
    "electra_gen_hidden_dim",
    "electra_gen_layers",
    "electra_gen_heads",
    "electra_gen_ffn_dim",
    "electra_max_positions",
    "electra_layernorm_eps",
)


@dataclass
class ElectraConfig(FairseqDataclass):
    # sizes: None = set by --arch (electra_small/base/large; electra_base's for --arch electra).
    # Left unset here so that an arch name also sizes the model under fairseq-hydra-train,
    # which fills a config's missing fields from these defaults before the arch function runs
    electra_embed_dim: Optional[int] = field(
        default=None,
        metadata={"help": "token/position embedding size (shared); default: the arch's"},
    )
    electra_hidden_dim: Optional[int] = field(
        default=None, metadata={"help": "discriminator hidden size; default: the arch's"}
    )
    electra_layers: Optional[int] = field(
        default=None, metadata={"help": "discriminator layers; default: the arch's"}
    )
    electra_heads: Optional[int] = field(
        default=None, metadata={"help": "discriminator attention heads; default: the arch's"}
    )
    electra_ffn_dim: Optional[int] = field(
        default=None, metadata={"help": "discriminator FFN size; default: the arch's"}
    )
    electra_gen_hidden_dim: Optional[int] = field(
        default=None, metadata={"help": "generator hidden size; default: the arch's"}
    )
    electra_gen_layers: Optional[int] = field(
        default=None, metadata={"help": "generator layers; default: the arch's"}
    )
    electra_gen_heads: Optional[int] = field(
        default=None, metadata={"help": "generator attention heads; default: the arch's"}
    )
    electra_gen_ffn_dim: Optional[int] = field(
        default=None, metadata={"help": "generator FFN size; default: the arch's"}
    )
    electra_max_positions: Optional[int] = field(
        default=None, metadata={"help": "learned positions; default: the arch's (512)"}
    )
    electra_dropout: float = field(default=0.1, metadata={"help": "dropout"})
    electra_attention_dropout: float = field(default=0.1, metadata={"help": "attention dropout"})
    electra_activation_fn: ChoiceEnum(utils.get_available_activation_fns()) = field(
        default="gelu", metadata={"help": "activation in FFNs and heads"}
    )
    electra_sample_temperature: float = field(
        default=1.0,
        metadata={"help": "temperature of the generator softmax the replacements are sampled from"},
    )
    electra_pooler_dropout: float = field(
        default=0.1, metadata={"help": "dropout in classification heads"}
    )
    electra_pooler_activation_fn: ChoiceEnum(utils.get_available_activation_fns()) = field(
        default="tanh", metadata={"help": "activation in classification heads"}
    )
    electra_layernorm_eps: Optional[float] = field(
        default=None,
        metadata={
            "help": "epsilon of every LayerNorm; default 1e-5, or the import's (1e-12 for published "
            "BERT/ELECTRA) with --electra-sizes-from"
        },
    )
    electra_discriminator_only: bool = field(
        default=False,
        metadata={
            "help": "build the discriminator alone (automatic for tasks that do not pre-train a generator)"
        },
    )
    electra_freeze_discriminator: bool = field(
        default=False,
        metadata={
            "help": "train the generator alone: the discriminator, its head and the shared embeddings keep "
            "their values (the warm-up of a fresh generator for a discriminator published without one)"
        },
    )
    electra_embed_init: Optional[str] = field(default=None, metadata={"help": embed_init.HELP})
    electra_sizes_from: Optional[str] = field(
        default=None,
        metadata={
            "help": "take every size left unset (embedding, hidden, layers, heads, FFN of the discriminator "
            "and the generator, positions, LayerNorm eps) from DIR/import.json, written by "
            "scripts/convert_hf.py import; read when the model is configured, so checkpoints hold the sizes "
            "themselves"
        },
    )


def electra_sizes(args, size: ElectraSize) -> None:
    """Set every size the command line or config left unset (None or missing): an import's
    (``--electra-sizes-from``) first, then ``size``'s; the generator has the discriminator's depth
    unless given."""

    def fill(name, value):
        if getattr(args, name, None) is None:
            setattr(args, name, value)

    import_sizes.apply(args, "electra_sizes_from", keys=IMPORTED_SIZES)
    fill("electra_embed_dim", size.embed)
    fill("electra_hidden_dim", size.hidden)
    fill("electra_layers", size.layers)
    fill("electra_heads", size.heads)
    fill("electra_ffn_dim", size.ffn)
    fill("electra_gen_hidden_dim", size.gen_hidden)
    fill("electra_gen_layers", args.electra_layers)
    fill("electra_gen_heads", size.gen_heads)
    fill("electra_gen_ffn_dim", size.gen_ffn)
    fill("electra_max_positions", size.max_positions)
    fill("electra_layernorm_eps", 1e-5)
