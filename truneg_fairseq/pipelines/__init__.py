"""What runs other parts end to end: the demo's and the study's pipeline (``study/``) and the
masked-LM evaluation of checkpoints and imported models on data or raw text
(``evaluate_mlm.py``). The top layer: may import every package."""
