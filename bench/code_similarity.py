"""How much of a C module is Linux's tcp_bbr.c with the names changed? Prints two figures.

    .venv/bin/python bench/code_similarity.py REFERENCE.c [OURS.c ...]

REFERENCE.c is a tcp_bbr.c (Linux's net/ipv4/tcp_bbr.c, e.g. from Debian's linux-source-6.1
package; it is not shipped with this project). OURS defaults to modules/bbr1/bbr1_core.c.

- equal lines: the share of our non-trivial lines that equal a line of the reference once
  comments and whitespace are dropped, the `bbr1_`/`bbr3_` prefix becomes `bbr_` and the state
  pointer (`b`, `bbr`, or any name declared as `struct bbr*`) gets one name. Non-trivial: at least
  12 characters and not only punctuation, a keyword, a preprocessor include or a declaration of a local without a value.
- same function names: our function definitions whose name, after the prefix change, is a
  function name of the reference.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREFIX = re.compile(r"\b(bbr1|bbr3)_")
STATE_DECL = re.compile(r"struct\s+bbr[13]?\s*\*\s*(\w+)")
TRIVIAL = re.compile(r"^(#include.*|[{}();,\s]*|(return|break|continue|else|default:|do)\s*;?|"
                     r"(const\s+)?(struct\s+)?\w+\s*\**\s*\w+(,\s*\**\w+)*;)$")
# A definition: at column 0, a return type, the name, a parameter list, then the body's brace.
FUNCTION = re.compile(r"^[A-Za-z_][\w \t\*]*?\b(\w+)\(([^;{}()]|\([^;{}()]*\))*\)\s*\{", re.MULTILINE)


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", " ", text)


def normalised_lines(text: str) -> list[str]:
    """Lines without comments and indentation, the prefix and the state pointer's name unified."""
    body = strip_comments(text)
    names = sorted({"b", "bbr"} | set(STATE_DECL.findall(body)))
    pointer = re.compile(r"\b(" + "|".join(names) + r")\b(?=\s*(->|=|\)|,|;))")
    lines = []
    for line in body.splitlines():
        line = " ".join(line.split())
        line = PREFIX.sub("bbr_", line).replace("BBR1_", "BBR_").replace("BBR3_", "BBR_")
        line = pointer.sub("bbr", line)
        lines.append(line)
    return lines


def non_trivial(lines: list[str]) -> list[str]:
    return [line for line in lines if len(line) >= 12 and not TRIVIAL.match(line)]


def function_names(text: str) -> set[str]:
    """Names of function definitions: a line at column 0 that opens a parameter list."""
    body = strip_comments(text)
    names = set()
    for match in FUNCTION.finditer(body):
        name = match.group(1)
        if name not in {"if", "while", "for", "switch", "return", "sizeof"} and not name.isupper():
            names.add(PREFIX.sub("bbr_", name))
    return names


def compare(reference: str, ours: str) -> tuple[int, int, int, int]:
    ref_lines = set(non_trivial(normalised_lines(reference)))
    our_lines = non_trivial(normalised_lines(ours))
    equal = sum(line in ref_lines for line in our_lines)
    ref_names, our_names = function_names(reference), function_names(ours)
    return equal, len(our_lines), len(our_names & ref_names), len(our_names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference", type=Path)
    parser.add_argument("ours", type=Path, nargs="*", default=[ROOT / "modules/bbr1/bbr1_core.c"])
    args = parser.parse_args()
    reference = args.reference.read_text()
    for path in args.ours:
        equal, total, same_names, functions = compare(reference, path.read_text())
        print(f"{path.name}: {equal}/{total} non-trivial lines equal a reference line "
              f"({100 * equal / max(total, 1):.1f} %); {same_names}/{functions} functions keep a reference name")


if __name__ == "__main__":
    main()
