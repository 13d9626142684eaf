"""The instruction mix of each loop of a SASS listing: where a kernel's issue slots go.

    python bench/sass_loops.py KERNEL.sass [--most N]

A loop is a backward branch (``BRA`` to a label before it) and the instructions from
that label to the branch; for each, smallest first, it prints the label, the
instruction count and the count of each opcode (predicates and modifiers dropped:
``@!P0 FSETP.GEU.AND`` counts as ``FSETP``). An inner loop also shows inside the
loops around it; ``--most`` leaves out loops longer than N instructions (the outer
ones). Divide a loop's count by the elements one trip handles for instructions an
element: the softmax rows' fold of a staged float32 vector (4 elements) took 65
before the exp and maximum of ``runtime/fastmath.py``, 41 after (bench/NOTES.md,
2026-12-03).

The listings come from ``bench/softmax_sass.py --keep DIR`` (and the other
``*_sass.py`` scripts), which need ``nvdisasm``: where no CUDA toolkit carries one,
Triton's wheel does (``pip download triton --no-deps``, then unzip
``triton/backends/nvidia/bin/nvdisasm`` and point ``NVDISASM`` at it).
"""

from __future__ import annotations

import argparse
import collections
import re

_LABEL = re.compile(r"\s*(\.L_x_\d+):")
_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
_BRANCH = re.compile(r"BRA\s+(?:`\()?(\.L_x_\d+)")
_PREDICATE = re.compile(r"^@!?U?P\w+\s+")


def loops(text: str) -> list[tuple[str, list[str]]]:
    """``(label, instructions)`` of each loop of the listing ``text``, in the order
    their branches appear."""
    instructions, labels = [], {}
    for line in text.splitlines():
        label = _LABEL.match(line)
        if label:
            labels[label.group(1)] = len(instructions)
            continue
        instruction = _INSTRUCTION.search(line)
        if instruction:
            instructions.append(instruction.group(2).strip())
    found = []
    for i, instruction in enumerate(instructions):
        branch = _BRANCH.search(instruction)
        if branch and labels.get(branch.group(1), i + 1) <= i:
            found.append((branch.group(1), instructions[labels[branch.group(1)]:i + 1]))
    return found


def opcodes(instructions: list[str]) -> collections.Counter:
    """How many of each opcode, without predicates or modifiers."""
    return collections.Counter(_PREDICATE.sub("", i).split()[0].split(".")[0]
                               for i in instructions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("listing", help="a SASS listing (nvdisasm -c output)")
    parser.add_argument("--most", type=int, default=None,
                        help="leave out loops of more instructions than this")
    options = parser.parse_args()
    with open(options.listing) as f:
        found = loops(f.read())
    for label, body in sorted(found, key=lambda loop: len(loop[1])):
        if options.most is None or len(body) <= options.most:
            mix = ", ".join(f"{op} {n}" for op, n in opcodes(body).most_common())
            print(f"{label:>8}  {len(body):5d} instructions: {mix}")


if __name__ == "__main__":
    main()
