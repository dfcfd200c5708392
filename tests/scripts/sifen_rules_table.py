#!/usr/bin/env python3
"""Extracts the Manual Técnico v150 §12.4 table ("Validaciones del formato") into
infrastructure/sifen-rules/src/table.tsv: one row per rule code with N° Val, field, code,
effect (R, N, AO) and the Manual's message.

Usage: python3 tests/scripts/sifen_rules_table.py [manual-text] > infrastructure/sifen-rules/src/table.tsv
The default input is vendor/sifen/manual/manual-tecnico-v150-s12.4.txt (pages 159-193 of the
text in ../shared/sifen/manual). The text is mechanical: page banners and the table's header
cells are dropped, then each row is read as: N° Val, field id, message lines, a 4-digit code,
observation lines, the effect.
"""
import re
import sys
from pathlib import Path

HEADER = {"N° Val", "ID", "Mensaje de la Validación", "Código", "Observación", "E"}
EFFECTS = {"R", "N", "AO"}


def lines_of(text):
    """The table's cells, one per line: from the §12.4 heading on, without page banners, page
    numbers (indented three-digit lines), the header cells and the group headings."""
    raw = text.splitlines()
    begin = next(i for i, l in enumerate(raw) if l.strip().startswith("12.4."))
    out = []
    for line in raw[begin + 1:]:
        if re.fullmatch(r"\s{2,}\d{3}\s*", line):
            continue
        line = line.strip()
        if line.startswith("13. Gráfica"):
            break
        if not line or line in HEADER or line.startswith("PÁGINA") or line.startswith("====="):
            continue
        if line.startswith("septiembre de 2019") or line == "Validaciones del formato":
            continue
        if re.match(r"^[A-J]\d*\. ", line):
            continue
        out.append(line)
    return out


ID = re.compile(r"^([A-J][A-Z]?\d{3}[a-z]?\d?)\b\s*(.*)$")


def rows(lines):
    """A row starts with its N° Val (digits) followed by a field id; the Manual repeats a
    number once (117), so rows are found by that shape, not by counting."""
    i = 0
    result = []
    while i + 1 < len(lines):
        m = ID.match(lines[i + 1])
        if not (re.fullmatch(r"\d{1,3}", lines[i]) and m):
            i += 1
            continue
        n = int(lines[i])
        field, rest = m.group(1), m.group(2).strip()
        i += 2
        message = [rest] if rest else []
        while i < len(lines) and not re.fullmatch(r"\d{4}", lines[i]):
            message.append(lines[i])
            i += 1
        if i >= len(lines):
            break
        code = lines[i]
        i += 1
        while i < len(lines) and lines[i] not in EFFECTS:
            i += 1
        effect = lines[i] if i < len(lines) else "R"
        i += 1
        text = re.sub(r"\s+", " ", " ".join(message)).strip()
        result.append((n, field, code, effect, text))
    return result


def main():
    root = Path(__file__).resolve().parents[2]
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "vendor/sifen/manual/manual-tecnico-v150-s12.4.txt"
    table = rows(lines_of(source.read_text(encoding="utf-8")))
    print("n\tid\tcode\teffect\tmessage")
    for n, field, code, effect, message in table:
        print(f"{n}\t{field}\t{code}\t{effect}\t{message}")


if __name__ == "__main__":
    main()
