"""Tasks registered by the plugin: ``batch_masked_lm`` (``masked_lm`` with each batch read and
masked in one go), ``electra`` (ELECTRA pre-training: masked blocks, the model
told to add its generator), ``cline`` (aligned x_ori/x_syn/x_ant triples) and ``squad``
(extractive QA fine-tuning). Masked-LM pre-training of RoBERTa and BERT runs on
``batch_masked_lm`` or fairseq's own ``masked_lm``; GLUE fine-tuning uses fairseq's ``sentence_prediction``."""

from . import batch_masked_lm, cline, electra, squad  # noqa: F401  (registration)
