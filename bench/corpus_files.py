"""The corpus file format shared by bench/nccl_tests_corpus.py and bench/public_steps.py: '# key: value' header
lines (a line '#   ...' continues the key above), other '#' lines comments, blank lines skipped, the rest rows."""
import re

KEY = re.compile(r"^# ([a-z_]+): ?(.*)$")
MORE = re.compile(r"^#   +(.*)$")


def corpus_rows(path, meta):
    """Yields (line number, text) of each row of `path`, filling `meta` (a dict) with the header lines read so
    far: a row sees the metadata above it."""
    last = None
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if line.startswith("#"):
                m, c = KEY.match(line), MORE.match(line)
                if m:
                    last = m.group(1)
                    meta[last] = m.group(2).strip()
                elif c and last:
                    meta[last] += " " + c.group(1).strip()
                continue
            if line.strip():
                yield lineno, line
