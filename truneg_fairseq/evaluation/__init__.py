"""Statistics and metrics on trained models and their predictions: the paper's Table 2 and
Figure 3 on checkpoints (``false_negatives.py``), CLINE's Hits (``hits.py``), SQuAD EM/F1
(``squad_metrics.py``) and GLUE contrast consistency (``contrast.py``). Imports ``data/``,
``models/`` and the layers below; tasks and criterions may import it (their validation metrics)."""
