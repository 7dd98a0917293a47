"""`python -m ppx.protocol`: print the switch table (every axis, every design, its default).
`--write FILE` replaces the table between the markers of FILE (docs/protocols.md)."""

from __future__ import annotations

import sys

from ppx.protocol.table import BEGIN, END, block, markdown


def main(argv: list[str]) -> int:
    if argv[:1] != ["--write"]:
        print(markdown(), end="")
        return 0
    path = argv[1]
    text = open(path).read()
    if BEGIN not in text or END not in text:
        print(f"ppx.protocol: {path} has no switches markers", file=sys.stderr)
        return 2
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    with open(path, "w") as f:
        f.write(head + block() + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
