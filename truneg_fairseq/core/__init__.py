"""The framework-free core: everything a counter-false-negative step computes, on torch and numpy
alone. The fairseq criterions (:mod:`truneg_fairseq.criterions`) and the HuggingFace objective
(:mod:`truneg_fairseq.hf`) are front ends over it: each turns its world's batch into these tensors
and these sums into its world's log. Nothing here imports fairseq or transformers
(``tests/test_core.py`` walks every import).

* :mod:`.objectives`: the registry of objectives, one class a file (``mlm``,
  ``hard_correction``, ``soft_reg``, ``sent_kl``, ``electra``): their parameters, terms and
  statistics, from which both front ends and their flags are made;
* :mod:`.step`: one masked-LM step (the objective's terms, the loss, the logged sums), the
  prediction-filled sentence and the sentence-KL encodings given an ``encode`` callable;
* :mod:`.losses`: the per-position loss math (Eq. 1-3, the sentence KL, ELECTRA's BCE);
* :mod:`.replaced_tokens`: ELECTRA's replacement sampling, corrupted input and RTD term;
* :mod:`.selection`: which positions the masked-LM head predicts (masked positions or static slots);
* :mod:`.lookup`: the synonym table's device lookup (:mod:`.pairs`: its pair key);
* :mod:`.masking`: whole-batch masking from counters (fairseq's task and the HF collator);
* :mod:`.statistics`: the one definition of every logged number and the reduction of sums to it;
* :mod:`.sums`: the logging sums of a loop outside fairseq (one all-reduce, one read per log).
"""
