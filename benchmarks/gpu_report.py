"""The GPU check's report: the device and software, and one line per row (PASS, FAIL or not
run, with the reason), written as ``report.md`` and ``report.json`` (each atomically)."""

import json
import os
import platform
import subprocess


def device_info() -> dict:
    import torch

    info = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "cpu_cores": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next(
                line.split(":", 1)[1].strip() for line in f if line.startswith("model name")
            )
    except (OSError, StopIteration):
        pass
    for name in ("fairseq", "transformers"):
        try:
            info[name] = __import__(name).__version__
        except Exception:
            info[name] = None
    if info["cuda_available"]:
        props = torch.cuda.get_device_properties(0)
        info.update(
            gpu=torch.cuda.get_device_name(0),
            gpu_memory_gib=round(props.total_memory / 2**30, 1),
            gpu_count=torch.cuda.device_count(),
            compute_capability=f"{props.major}.{props.minor}",
            bf16_supported=torch.cuda.is_bf16_supported(),
        )
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            )
            info["driver"] = (
                out.stdout.strip().splitlines()[0]
                if out.returncode == 0 and out.stdout.strip()
                else None
            )
        except (OSError, subprocess.SubprocessError):
            info["driver"] = None
    info["device"] = (
        info.get("gpu") or f"CPU: {info['cpu']} ({info['cpu_cores']} cores), no CUDA GPU"
    )
    return info


def _fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def render_md(r: dict) -> str:
    d = r["device"]
    kind = (
        "QUICK check (tiny sizes: a test of the command, not a measurement)"
        if r["quick"]
        else "Check"
    )
    counts = r["counts"]
    lines = [
        f"# GPU check: {d['device']}",
        "",
        f"{kind}, {r['elapsed_s']:.0f} s of a {r['budget_s']:.0f} s budget"
        + (", `--full`" if r.get("full") else "")
        + f". Rows: {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['not run']} not run"
        + (f" ({counts['budget']} of them for the time budget)" if counts["budget"] else "")
        + f". Peak for MFU: {_fmt(r['peak_tflops'])} TFLOP/s bf16 dense ({r['peak_source']}).",
        "",
        "| # | section | row | status | reason |",
        "|---|---|---|---|---|",
    ]
    for i, row in enumerate(r["rows"], 1):
        reason = str(row.get("reason", "")).replace("|", "/").replace("\n", " ")
        lines.append(f"| {i} | {row['section']} | {row['title']} | {row['status']} | {reason} |")
    for model, runs in r.get("curves", {}).items():
        done = [p for p, run in runs.items() if run.get("losses")]
        if not done:
            continue
        n = max(len(runs[p]["losses"]) for p in done)
        every = max(1, n // 10)
        lines += ["", f"## Loss per update: {model}", ""]
        lines += ["| update | " + " | ".join(done) + " |", "|---|" + "---|" * len(done)]
        for i in sorted(set(range(0, n, every)) | {0, 1, n - 1}):
            cells = [runs[p]["losses"][i] if i < len(runs[p]["losses"]) else None for p in done]
            lines.append(f"| {i + 1} | " + " | ".join(_fmt(x, ".4f") for x in cells) + " |")
    lines += ["", "## Device and software", "", "| | |", "|---|---|"]
    for k, v in d.items():
        lines.append(f"| {k} | {v} |")
    lines += [
        "",
        f"Command: `{r['command']}`; corpus: {r.get('corpus', {}).get('source', '-')}.",
        "",
    ]
    return "\n".join(lines)


def write_reports(out_dir: str, report: dict) -> None:
    """report.json and report.md, each written whole or not at all (nothing else in the
    directory is touched)."""
    from truneg_fairseq.outputs import atomic_open

    with atomic_open(os.path.join(out_dir, "report.json")) as f:
        json.dump(report, f, indent=1, default=str)
        f.write("\n")
    with atomic_open(os.path.join(out_dir, "report.md")) as f:
        f.write(render_md(report))
