"""Tasks registered by the plugin (fairseq also auto-imports every module in this folder).

Masked-LM pre-training uses fairseq's own ``masked_lm`` task."""
