"""Tasks registered by the plugin: ``electra`` (ELECTRA pre-training: masked blocks, the model
told to add its generator), ``cline`` (aligned x_ori/x_syn/x_ant triples) and ``squad``
(extractive QA fine-tuning). Masked-LM pre-training of RoBERTa and BERT uses fairseq's own
``masked_lm``; GLUE fine-tuning uses fairseq's ``sentence_prediction``."""

from . import cline, electra, squad  # noqa: F401  (registration)
