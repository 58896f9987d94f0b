"""HuggingFace BERT/ELECTRA directories in and ELECTRA/BERT/RoBERTa directories out (``hf.py``)."""
