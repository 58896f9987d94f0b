"""SQuAD preparation logs its progress on a long input."""

import json
import re

# ---- SQuAD preparation --------------------------------------------------------------------


def test_squad_preparation_of_a_long_input_logs_progress(
    tmp_path, corpus_dir, data_bin, monkeypatch, caplog
):
    from fairseq.data import Dictionary
    from squad_fixtures import squad_json

    import truneg_fairseq.data.squad_windows as squad

    path = tmp_path / "train.json"
    path.write_text(json.dumps(squad_json(n_copies=6)))
    monkeypatch.setattr(squad, "PROGRESS_EVERY", 5)
    monkeypatch.setattr(squad, "PROGRESS_EVERY_ARTICLES", 2)
    wt = squad.WordTokenizer(
        Dictionary.load(str(data_bin / "dict.txt")),
        "sentencepiece",
        spm_model=str(corpus_dir / "spm.model"),
    )
    with caplog.at_level("INFO", logger="truneg_fairseq.data.squad_windows"):
        examples = squad.load_squad_json(path)
        data = squad.build_features(examples, wt, train=True)
    assert "train.json: 2 of 6 articles read" in caplog.text
    assert re.search(rf"SQuAD: 5 of {len(data.examples)} questions tokenized", caplog.text)
