"""Commands run as a test needs them: a script's ``main`` in this process as a
new interpreter would run it, any command line as a new process (with its import log), a shell
recipe of ``examples/``, and a snapshot of the files a command must leave alone."""

import contextlib
import io
import logging
import os
import runpy
import subprocess
import sys
import traceback
import warnings
from pathlib import Path
from typing import List, Optional, Sequence

from repo_paths import REPO


class _Exit:
    code = 0


def _loggers() -> List[logging.Logger]:
    return [logging.getLogger()] + [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]


@contextlib.contextmanager
def as_a_process(
    argv: Sequence[str],
    cwd: Optional[Path] = None,
    log_level: int = logging.WARNING,
    log_format: Optional[str] = None,
):
    """Run a command's ``main`` in this process the way a new interpreter would run it: in
    ``cwd``, with ``sys.argv`` = ``argv``, one torch thread (``OMP_NUM_THREADS=1``), nothing in the
    root logger but a handler to the command's stdout (``log_format``; none: the logging
    configuration the command makes itself), every warning shown on its stderr. Yields
    ``(stdout, stderr, exit)`` (``io.StringIO``, ``io.StringIO``, an object whose ``code`` is
    the exit status): ``SystemExit`` gives its status, any other exception status 1 and its
    traceback on stderr, as the interpreter would. Everything is put back afterwards, the
    handlers a command added to its loggers closed."""
    import torch

    out, err, status = io.StringIO(), io.StringIO(), _Exit()
    root = logging.getLogger()
    saved_handlers = {lg: list(lg.handlers) for lg in _loggers()}
    saved = root.level, sys.argv, torch.get_num_threads(), os.getcwd()
    saved_path = list(sys.path)  # fairseq's --user-dir import inserts into it
    root.handlers = []
    if log_format:
        handler = logging.StreamHandler(out)
        handler.setFormatter(logging.Formatter(log_format, "%Y-%m-%d %H:%M:%S"))
        root.handlers = [handler]
    root.setLevel(log_level)
    sys.argv = list(argv)
    torch.set_num_threads(1)
    if cwd is not None:
        os.makedirs(cwd, exist_ok=True)
        os.chdir(cwd)
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            warnings.simplefilter("default")
            warnings.showwarning = lambda m, c, f, n, file=None, line=None: err.write(
                warnings.formatwarning(m, c, f, n, line)
            )
            try:
                yield out, err, status
            except SystemExit as e:
                if e.code is None or isinstance(e.code, int):
                    status.code = e.code or 0
                else:
                    status.code = 1
                    err.write(f"{e.code}\n")
            except Exception:
                status.code = 1
                err.write(traceback.format_exc())
    finally:
        os.chdir(saved[3])
        torch.set_num_threads(saved[2])
        sys.argv = saved[1]
        sys.path[:] = saved_path
        for lg in _loggers():
            before = saved_handlers.get(lg, [])
            for h in lg.handlers:
                if h not in before:
                    h.close()
            lg.handlers = before
        root.setLevel(saved[0])


def run_script(
    name: str, args: Sequence[str], cli: bool = False, **kw
) -> subprocess.CompletedProcess:
    """``python scripts/NAME ARGS``: the script's ``main(ARGS)`` in this process (see
    :func:`as_a_process`; ``cwd=`` is honoured), or a real subprocess with ``cli=True`` or any
    other ``subprocess.run`` keyword (``env``, ``preexec_fn``): a test about the process itself
    (environment variables read at import, resource limits, the interpreter's exit)."""
    path = REPO / "scripts" / name
    if cli or set(kw) - {"cwd"}:
        env = dict(os.environ, **kw.pop("env", {}))
        return subprocess.run(
            [sys.executable, str(path), *args], capture_output=True, text=True, env=env, **kw
        )
    cwd = kw.get("cwd")
    with as_a_process([str(path), *args], Path(cwd) if cwd else None) as (out, err, status):
        status.code = runpy.run_path(str(path), run_name="__script__")["main"](list(args)) or 0
    return subprocess.CompletedProcess(
        [str(path), *args], status.code, out.getvalue(), err.getvalue()
    )


def run_command(args: Sequence, cwd: Path, importtime: bool = False) -> subprocess.CompletedProcess:
    """``ARGS`` (each ``str()``'d) as a new process in ``cwd``, one torch thread, 120 s at most;
    with ``importtime=True`` run by this interpreter with ``-X importtime``, which logs every
    import on stderr (:func:`imported_modules`)."""
    prefix = [sys.executable, "-X", "importtime"] if importtime else []
    return subprocess.run(
        [*prefix, *[str(a) for a in args]],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
        timeout=120,
    )


def imported_modules(stderr: str) -> set:
    """The modules the ``-X importtime`` log on ``stderr`` names."""
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if "|" in line}


def run_recipe(script: str, args: Sequence[str], cwd: Path, **env) -> subprocess.CompletedProcess:
    """Run a shell recipe from examples/ with the virtualenv's fairseq-train on PATH, in fp32."""
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    full_env = dict(os.environ, PATH=path, FP16="", NUM_WORKERS="0", OMP_NUM_THREADS="1", **env)
    return subprocess.run(
        ["bash", str(REPO / "examples" / script), *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=str(cwd),
    )


def snapshot(root) -> dict:
    """{path relative to ``root`` (posix): bytes} of every file below ``root``: what a test
    compares before and after a command that must leave them alone."""
    root = Path(root)
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
