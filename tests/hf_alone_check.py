"""The HuggingFace front end installed alone, as docs/hf.md says: run by ``make test-hf-alone``
in a fresh virtualenv holding requirements-hf.txt and the package (``pip install --no-deps -e
.``), no fairseq. Checks, each a real command on a tiny local BERT and real WordNet:

* fairseq is not importable there (the environment is what the HF side alone gets);
* ``truneg-hf-train`` with its defaults (``--report-to tensorboard``) trains, saves and writes
  TensorBoard events;
* ``examples/hf/continue.sh`` (``CPU=1``) runs there: it needs ``truneg-hf-train``, not
  ``fairseq-train``;
* ``truneg-plot-run`` turns that run into its table and figures.

Not a pytest file: the main suite's environment has fairseq. Run with ``PYTHONPATH=tests`` (the
tests' fixture helpers: a tiny BERT, tiny texts), as the Makefile does. Exits 0 when every check holds,
else 1 with the failing check's output."""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def run(cmd, **env) -> str:
    print("+", " ".join(map(str, cmd)), flush=True)
    proc = subprocess.run(
        [str(c) for c in cmd],
        capture_output=True,
        text=True,
        env=dict(os.environ, OMP_NUM_THREADS="1", **env),
        cwd=REPO,
    )
    if proc.returncode != 0:
        print(proc.stdout[-4000:], proc.stderr[-4000:], sep="\n", file=sys.stderr)
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(map(str, cmd))}")
    return proc.stdout + proc.stderr


def main() -> int:
    from hf_fixtures import tiny_bert_and_texts

    if importlib.util.find_spec("fairseq") is not None:
        raise SystemExit("fairseq is importable here: run this in the HF-only environment")
    bin_dir = Path(sys.executable).parent
    root = Path(tempfile.mkdtemp(prefix="hf-alone-"))
    try:
        tiny = tiny_bert_and_texts(root)
        out = root / "run"
        log = run(
            [bin_dir / "truneg-hf-train", tiny / "bert", "--train", tiny / "texts",
             "--output-dir", out, "--cpu", "--batch-size", "4", "--seq-len", "32",
             "--max-steps", "3", "--save-steps", "3", "--log-steps", "1"],
        )  # fmt: skip
        assert "num_updates 3" in log, log[-2000:]
        assert (out / "checkpoint-3" / "model.safetensors").is_file()
        assert any((out / "runs").rglob("events.out.tfevents.*")), "no TensorBoard events"
        recipe = root / "recipe"
        log = run(
            ["bash", REPO / "examples/hf/continue.sh", tiny / "bert", tiny / "texts", "mlm",
             "--report-to", "none"],
            CPU="1", MAX_STEPS="2", SEQ="32", BATCH="2", ACCUM="1", SAVE_STEPS="2",
            OUT=str(recipe), PYTHON=sys.executable, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        )  # fmt: skip
        assert (recipe / "checkpoint-2" / "model.safetensors").is_file(), log[-2000:]
        plots = root / "plots"
        log = run([bin_dir / "truneg-plot-run", out, "--out", plots])
        assert (plots / "ratios.png").is_file() and (plots / "losses.png").is_file(), log
        print("the HuggingFace side alone: truneg-hf-train, examples/hf/continue.sh and "
              "truneg-plot-run ran without fairseq")  # fmt: skip
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
