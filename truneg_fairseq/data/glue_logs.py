"""The validation lines of a fairseq training log (GLUE and the robustness reports read the
metrics of each validation from them)."""

import re

VALID_LINE = re.compile(r"valid on '(\w+)' subset \| (.*)$")


def parse_validation_log(path):
    """Validation lines of a fairseq log: list of (subset, {metric: value})."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = VALID_LINE.search(line.rstrip())
            if not m:
                continue
            vals = {}
            for item in m.group(2).split(" | "):
                parts = item.rsplit(" ", 1)
                if len(parts) == 2:
                    try:
                        vals[parts[0]] = float(parts[1])
                    except ValueError:
                        pass
            out.append((m.group(1), vals))
    return out
