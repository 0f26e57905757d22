#!/usr/bin/env python3
"""Room sizes (issue 24): no production source file over MAX_FILE lines, no function over MAX_FUNC lines; a
warning (issue 35) for a file over WARN_FILE lines, near the cap: split it by concern before a feature must.

Production sources: the C++ files of core/, sim/, real/, calibrate/, validate/, plot/ and app/ (tests, fuzz
harnesses and benchmarks are not counted). A function is a brace block opened at namespace or class scope
after a parameter list `)` (qualifiers such as const, noexcept, override, or a trailing return type may follow);
its length is from the line of its opening brace to the line of its closing brace. Lambdas and blocks inside a
function count toward that function. Prints each offender as FILE:LINE; exit 1 if any. Prints each file over
WARN_FILE lines as "FILE: N lines (warning: ...)"; warnings alone exit 0.
  python3 scripts/check_sizes.py [--max-file N] [--warn-file N] [--max-func N] [--top K]
"""
import argparse
import os
import re
import sys

ROOTS = ["core", "sim", "real", "calibrate", "validate", "plot", "app"]
EXTS = (".cpp", ".hpp", ".h", ".cc", ".cu")


def strip_code(text):
    """The text with comments, string and character literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j, n - 1) - i + 1))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


FUNC_TAIL = re.compile(r"\)\s*(const|noexcept|override|final|mutable|&|&&|->\s*[\w:<>,\s\*&]+|\s)*$")
SCOPE_HEAD = re.compile(r"\b(namespace|class|struct|union|enum)\b[^;{}()]*$|\bextern\s*$")


def functions(code):
    """(start_line, end_line) of every function body opened at namespace or class scope."""
    stack = []  # entries: 'scope' or ('func', start_line) or 'block'
    line = 1
    last = 0  # index after the last ; { or } seen: the text of the current declaration starts there
    found = []
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            head = code[last:i]
            in_func = any(isinstance(s, tuple) or s == "block" for s in stack)
            if in_func:
                stack.append("block")
            elif SCOPE_HEAD.search(head) and not FUNC_TAIL.search(head.rstrip()):
                stack.append("scope")
            elif FUNC_TAIL.search(head.rstrip()) or re.search(r"\)\s*:\s*[\s\S]*\)\s*$", head.rstrip()):
                stack.append(("func", line))
            else:
                stack.append("block")  # an initialiser or aggregate at namespace scope
            last = i + 1
        elif c == "}":
            if stack:
                s = stack.pop()
                if isinstance(s, tuple):
                    found.append((s[1], line))
            last = i + 1
        elif c == ";":
            last = i + 1
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-file", type=int, default=600)
    ap.add_argument("--warn-file", type=int, default=500)
    ap.add_argument("--max-func", type=int, default=120)
    ap.add_argument("--top", type=int, default=0, help="also list the K largest files and functions")
    a = ap.parse_args()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    files, funcs = [], []
    for r in ROOTS:
        for dirpath, _, names in os.walk(os.path.join(root, r)):
            for name in names:
                if not name.endswith(EXTS):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                text = open(path, encoding="utf-8", errors="replace").read()
                files.append((text.count("\n"), rel))
                for start, end in functions(strip_code(text)):
                    funcs.append((end - start + 1, f"{rel}:{start}"))
    bad = 0
    for n, rel in sorted(files, reverse=True):
        if n > a.max_file:
            print(f"{rel}: {n} lines (limit {a.max_file})")
            bad += 1
        elif n > a.warn_file:
            print(f"{rel}: {n} lines (warning: over {a.warn_file}; the limit is {a.max_file}: split it by concern)")
    for n, where in sorted(funcs, reverse=True):
        if n > a.max_func:
            print(f"{where}: a function of {n} lines (limit {a.max_func})")
            bad += 1
    if a.top:
        print("largest files:", ", ".join(f"{rel} {n}" for n, rel in sorted(files, reverse=True)[: a.top]))
        print("largest functions:", ", ".join(f"{w} {n}" for n, w in sorted(funcs, reverse=True)[: a.top]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
