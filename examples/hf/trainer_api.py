#!/usr/bin/env python
"""The library behind truneg-hf-train in a few lines: hard correction on a local BERT with
transformers' Trainer (run it under torchrun for several processes).

  python examples/hf/trainer_api.py MODEL_DIR TEXT_FILE OUT_DIR [MAX_STEPS]
"""

import argparse

# the command line first: --help and a missing argument answer before transformers is imported
cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
cli.add_argument("model_dir", metavar="MODEL_DIR", help="a local AutoModelForMaskedLM directory")
cli.add_argument("text", metavar="TEXT_FILE", help="training text, one sequence per line")
cli.add_argument("out", metavar="OUT_DIR", help="checkpoints, logs and the final model")
cli.add_argument("steps", metavar="MAX_STEPS", type=int, nargs="?", default=1000)
model_dir, text, out, steps = vars(cli.parse_args()).values()

from transformers import AutoModelForMaskedLM, AutoTokenizer, TrainingArguments  # noqa: E402

from truneg_fairseq.hf import (  # noqa: E402
    MaskedLMCollator,
    TrueNegativeMLM,
    TrueNegativeTrainer,
    build_synonym_table,
    tokenize_lines,
)

tok = AutoTokenizer.from_pretrained(model_dir)
table, _ = build_synonym_table(tok)  # WordNet synonyms of the tokenizer's whole words
lines = [line for line in open(text, encoding="utf-8").read().splitlines() if line.strip()]
data = [{"input_ids": ids, "index": i} for i, ids in enumerate(tokenize_lines(tok, lines, 128))]
objective = TrueNegativeMLM(
    AutoModelForMaskedLM.from_pretrained(model_dir), tok, "hard_correction", table
)
args = TrainingArguments(out, max_steps=steps, per_device_train_batch_size=32, learning_rate=5e-5,
                         logging_steps=50, save_steps=500, report_to=["tensorboard"])  # fmt: skip
trainer = TrueNegativeTrainer(objective, args, data_collator=MaskedLMCollator(tok),
                              train_dataset=data, processing_class=tok)  # fmt: skip
trainer.train()  # logs loss (nats), mlm_loss_bits, corrected_loss_bits, mlm_acc, syn_acc, pred_corr_ratio, ...
trainer.save_model(out)  # AutoModelForMaskedLM.from_pretrained(out) loads it
