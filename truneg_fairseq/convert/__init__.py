"""HuggingFace BERT/ELECTRA directories in and ELECTRA/BERT/RoBERTa directories out (``hf.py``
gathers the names; one module per job beside it)."""
