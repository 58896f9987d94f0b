"""The one place the plugin's model sizes are written: ELECTRA's (:data:`ELECTRA_SIZES`) and BERT's
(:data:`BERT_SIZES`, which the RoBERTa-family test archs share). The registered architectures,
the HuggingFace importer (the generator of a discriminator published alone), the benchmarks and
the study read these tables; nothing else spells a size out. No fairseq or torch here, so any
tool can read the tables cheaply.
"""

from dataclasses import dataclass
from typing import Dict


@dataclass(frozen=True)
class ElectraSize:
    """One ELECTRA architecture's sizes: the shared embedding, the discriminator and the
    generator (whose depth is the discriminator's)."""

    embed: int
    hidden: int
    layers: int
    heads: int
    ffn: int
    gen_hidden: int
    gen_heads: int
    gen_ffn: int
    max_positions: int = 512


@dataclass(frozen=True)
class EncoderSize:
    """One BERT/RoBERTa encoder's sizes."""

    layers: int
    dim: int
    ffn: int
    heads: int
    max_positions: int = 512


# ELECTRA (Clark et al., 2020; google-research/electra), keyed by arch name
ELECTRA_SIZES: Dict[str, ElectraSize] = {
    # 2 layers of 32 (generator 16 wide): for tests and smoke runs
    "electra_tiny": ElectraSize(16, 32, 2, 2, 64, 16, 1, 32, max_positions=64),
    # 128-d embeddings projected to 256; generator at 1/4 width (64 hidden, 1 head, FFN 256)
    "electra_small": ElectraSize(128, 256, 12, 4, 1024, 64, 1, 256),
    # generator at 1/3 width (256 hidden, 4 heads, FFN 1024)
    "electra_base": ElectraSize(768, 768, 12, 12, 3072, 256, 4, 1024),
    # generator at 1/4 width (256 hidden, 4 heads, FFN 1024)
    "electra_large": ElectraSize(1024, 1024, 24, 16, 4096, 256, 4, 1024),
}

# the sizes Google published (the importer sizes a missing generator after these)
PUBLISHED_ELECTRA = ("electra_small", "electra_base", "electra_large")

# BERT (Devlin et al., 2019); base and large are also fairseq's roberta_base/roberta_large sizes
BERT_SIZES: Dict[str, EncoderSize] = {
    # 2 layers of 32: the tiny archs of the plugin's BERT, RoBERTa and CLINE (tests, smoke runs)
    "tiny": EncoderSize(layers=2, dim=32, ffn=64, heads=2, max_positions=64),
    "base": EncoderSize(layers=12, dim=768, ffn=3072, heads=12),
    "large": EncoderSize(layers=24, dim=1024, ffn=4096, heads=16),
}
