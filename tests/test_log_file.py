"""``--log-file``: fairseq's progress bar, created once per epoch and per validation, writes
each line to the file once (fairseq 0.12 added a handler per call: epoch N's lines N times)."""

import logging


def test_each_progress_bar_line_reaches_the_log_file_once(tmp_path):
    from fairseq.logging import progress_bar

    import truneg_fairseq  # noqa: F401  (the plugin's mends)

    path = tmp_path / "train.log"
    logger = progress_bar.logger
    before, level = list(logger.handlers), logger.level
    logger.setLevel(logging.INFO)  # as fairseq-train's logging configuration sets it
    try:
        for epoch in range(1, 4):  # what fairseq-train does: one bar per epoch (and validation)
            bar = progress_bar.progress_bar(
                [], log_format="simple", log_file=str(path), epoch=epoch
            )
            bar.print({"loss": float(epoch)}, tag="valid", step=epoch)
        for h in logger.handlers:
            h.flush()
        lines = path.read_text().splitlines()
    finally:
        for h in logger.handlers[len(before) :]:
            h.close()
        logger.handlers[:] = before
        logger.setLevel(level)
    assert len(lines) == 3, lines
    assert [line.split("|")[0].strip() for line in lines] == [
        "epoch 001",
        "epoch 002",
        "epoch 003",
    ]


def test_another_file_still_gets_its_own_handler(tmp_path):
    from fairseq.logging import progress_bar

    import truneg_fairseq  # noqa: F401

    logger = progress_bar.logger
    before = list(logger.handlers)
    try:
        for name in ("a.log", "b.log", "a.log"):
            progress_bar.progress_bar([], log_format="none", log_file=str(tmp_path / name))
        files = [h.baseFilename for h in logger.handlers if isinstance(h, logging.FileHandler)]
    finally:
        for h in logger.handlers[len(before) :]:
            h.close()
        logger.handlers[:] = before
    assert sorted(files[-2:]) == [str(tmp_path / "a.log"), str(tmp_path / "b.log")]
