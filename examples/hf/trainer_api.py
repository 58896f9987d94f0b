#!/usr/bin/env python
"""The library behind truneg-hf-train in a few lines: hard correction on a local BERT with
transformers' Trainer (run it under torchrun for several processes).

  python examples/hf/trainer_api.py MODEL_DIR TEXT_FILE OUT_DIR [MAX_STEPS]
"""

import sys

from transformers import AutoModelForMaskedLM, AutoTokenizer, TrainingArguments

from truneg_fairseq.hf import (
    MaskedLMCollator,
    TrueNegativeMLM,
    TrueNegativeTrainer,
    build_synonym_table,
    tokenize_lines,
)

model_dir, text, out = sys.argv[1:4]
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
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
trainer.train()  # logs loss, mlm_loss, corrected_loss, mlm_acc, syn_acc, pred_corr_ratio, ...
trainer.save_model(out)  # AutoModelForMaskedLM.from_pretrained(out) loads it
