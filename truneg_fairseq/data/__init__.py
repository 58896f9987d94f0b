"""Data sets built from text: pre-training corpora (``corpus.py``), count-based word vectors
(``word_vectors.py``), CLINE's aligned triples (``cline.py``), GLUE and SQuAD (``glue.py``,
``squad.py``) and the robustness perturbations (``perturb.py``). Imports ``text/``, ``lexicon/``
and the leaf modules only."""
