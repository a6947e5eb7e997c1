#!/usr/bin/env python3
"""Fails when a source file is too long or a function too long to read at once.

Run by CTest (`source_sizes`), or by hand: tests/tools/check_sizes.py [SOURCE_DIR]

What it holds every C++ file of src/ and include/ to:
- at most 800 lines per file;
- at most 80 lines per function body (from its `{` to its `}`, lambdas counted in the
  function that holds them), apart from declarative tables: a function whose signature is
  preceded by a comment containing "Declarative table"
  (a list of flags, a table of names) is not measured; the comment stands on one of the
  eight lines before the body opens.
Functions are found by reading braces: comments and string literals are skipped, and a `{`
opens a function body when what precedes it (since the last `;`, `{` or `}`) ends with a
parameter list, its qualifiers, or a constructor's initializer list.
Every violation is printed as `file:line: message`; the exit status is 1 if there is any.
"""

import pathlib
import re
import sys

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 80
EXEMPT = "Declarative table"


def strip(text):
    """The text without comments and literal contents; newlines are kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i) and re.match(r'R"([^(\s]*)\(', text[i:]):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000
                out.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


SIGNATURE_END = re.compile(r"\)\s*(const|noexcept|override|final|mutable|&|&&|->\s*[\w:<>,\s*&]+|\s)*$")
INITIALIZER_LIST = re.compile(r"\)\s*(noexcept\s*)?:\s*[\w:]+\s*[({]")
NOT_A_FUNCTION = re.compile(r"^(namespace|class|struct|enum|union|extern)\b|^(if|for|while|switch|catch)\s*\(")


def functions(code):
    """(name, line of the signature's end, lines of the body) of each outermost function."""
    depth = 0
    opened_at = None
    start = 0
    since = 0
    name = ""
    for i, c in enumerate(code):
        if c == "{":
            if opened_at is None:
                head = re.sub(r"\s+", " ", code[since:i]).strip()
                if (SIGNATURE_END.search(head) or INITIALIZER_LIST.search(head)) and not NOT_A_FUNCTION.search(head):
                    opened_at = depth
                    start = code.count("\n", 0, i) + 1
                    m = re.search(r"([~\w:]+)\s*\(", head)
                    name = m.group(1) if m else head[:40]
            depth += 1
            since = i + 1
        elif c == "}":
            depth -= 1
            if opened_at is not None and depth == opened_at:
                yield name, start, code.count("\n", 0, i) + 1 - start + 1
                opened_at = None
            since = i + 1
        elif c == ";":
            since = i + 1


def exempt(lines, line):
    """True when a comment saying EXEMPT stands within three lines above the signature."""
    for k in range(max(0, line - 8), line):
        if EXEMPT in lines[k]:
            return True
    return False


def check(path, rel):
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    problems = []
    count = text.count("\n")
    if count > MAX_FILE_LINES:
        problems.append(f"{rel}:1: {count} lines (at most {MAX_FILE_LINES}): split the file")
    for name, line, length in functions(strip(text)):
        if length > MAX_FUNCTION_LINES and not exempt(lines, line - 1):
            problems.append(f"{rel}:{line}: {name}: a body of {length} lines (at most {MAX_FUNCTION_LINES})")
    return problems


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    problems = []
    for top in ("src", "include"):
        for path in sorted((root / top).rglob("*")):
            if path.suffix in (".cpp", ".hpp", ".h", ".cc") and path.is_file():
                problems += check(path, path.relative_to(root))
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
