"""fairseq's BPE registry: ``--bpe wordpiece`` (BERT's WordPiece through this package's
tokenizer; fairseq's own ``bert`` BPE needs transformers' BertTokenizer and a download). fairseq
builds the word-start test of ``--mask-whole-words`` from it."""

from fairseq.data.encoders import register_bpe

from truneg_fairseq.text.spec import TokenizerSpec, tokenizer_fields
from truneg_fairseq.text.tokenizers import build_tokenizer
from truneg_fairseq.text.wordpiece import join_wordpieces

WordPieceBPEConfig = tokenizer_fields("wordpiece", names=("vocab", "lowercase"))


@register_bpe("wordpiece", dataclass=WordPieceBPEConfig)
class WordPieceBPE:
    """BERT's WordPiece via HF tokenizers (fairseq's ``bert`` BPE needs transformers'
    BertTokenizer and a download for its default vocabulary)."""

    def __init__(self, cfg):
        lower = str(cfg.wordpiece_lowercase)
        self.tok = build_tokenizer(
            TokenizerSpec(
                "wordpiece",
                vocab=cfg.wordpiece_vocab,
                lowercase=None if lower == "auto" else lower == "yes",
                flag_prefix="--wordpiece-",
            )
        )

    def encode(self, x: str) -> str:
        return " ".join(self.tok.pieces(x))

    def decode(self, x: str) -> str:
        return join_wordpieces(x.split())

    def is_beginning_of_word(self, x: str) -> bool:
        return self.tok.starts_word(x)
