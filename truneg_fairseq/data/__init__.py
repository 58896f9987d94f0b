"""Data sets built from text: the steps of pre-training corpora (``corpus_steps.py``), count-based
word vectors (``ppmi_vectors.py``), CLINE's aligned triples (``cline_data.py``,
``cline_triples.py``), GLUE and SQuAD (``glue_tasks.py``, ``squad_windows.py``) and the
robustness perturbations (``perturbations.py``). Imports ``text/``, ``lexicon/``
and the leaf modules only."""
