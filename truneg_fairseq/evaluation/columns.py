"""The scores of a checkpoint that tables show, as ``(report key, header, format)``: shared by
``truneg-evaluate-mlm``'s table and the study's progress table (each adds its own loss column
and counts)."""

SCORE_COLUMNS = [
    ("mlm_acc", "MLM acc %", "{:.2f}"),
    ("syn_acc", "syn-aware acc %", "{:.2f}"),
    ("pred_corr_ratio", "pred-level %", "{:.3f}"),
    ("iter_corr_ratio", "iter-level %", "{:.2f}"),
    ("iter_corr_ratio_512", "iter-level % (512)", "{:.2f}"),
    ("content_pred", "content preds %", "{:.1f}"),
]
