#!/usr/bin/env python3
"""Checks the book: every fenced Rust block is only {{#include}} lines (so
every snippet comes from a file the workspace compiles and tests), every
include names an existing file and anchor, and every internal link and image
resolves (with its #anchor, for links to chapters)."""
import pathlib
import re
import sys

SRC = pathlib.Path(__file__).resolve().parent.parent / "book" / "src"
if len(sys.argv) > 1:
    SRC = pathlib.Path(sys.argv[1]).resolve()
errors = []

def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")

def anchors(md):
    text = md.read_text()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, flags=re.M)}

chapters = sorted(SRC.rglob("*.md"))
for md in chapters:
    text = md.read_text()
    rel = md.relative_to(SRC)
    for m in re.finditer(r"^```(\w*)[^\n]*\n(.*?)^```", text, flags=re.S | re.M):
        lang, body = m.group(1), m.group(2)
        if lang == "rust":
            lines = [l for l in body.splitlines() if l.strip()]
            if not lines or not all(re.fullmatch(r"\{\{#include [^}]+\}\}", l.strip()) for l in lines):
                errors.append(f"{rel}: a Rust block written inline (use {{{{#include file:anchor}}}}):\n{body}")
    for m in re.finditer(r"\{\{#include ([^}:]+)(?::([\w-]+))?\}\}", text):
        target = (md.parent / m.group(1)).resolve()
        if not target.exists():
            errors.append(f"{rel}: include of a missing file {m.group(1)}")
        elif m.group(2) and f"ANCHOR: {m.group(2)}" not in target.read_text():
            errors.append(f"{rel}: {m.group(1)} has no anchor `{m.group(2)}`")
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)\)", prose):
        link = m.group(1)
        if re.match(r"^[a-z]+:", link):
            continue
        path, _, anchor = link.partition("#")
        target = (md.parent / path).resolve() if path else md
        if not target.exists():
            errors.append(f"{rel}: broken link {link}")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            errors.append(f"{rel}: {link}: no heading with anchor #{anchor}")
    if not text.strip():
        errors.append(f"{rel}: empty chapter")

summary = (SRC / "SUMMARY.md").read_text()
for m in re.finditer(r"\]\(([^)]+\.md)\)", summary):
    if not (SRC / m.group(1)).exists():
        errors.append(f"SUMMARY.md: missing chapter {m.group(1)}")

for e in errors:
    print("book:", e, file=sys.stderr)
if errors:
    sys.exit(1)
print(f"book: {len(chapters)} chapters, every Rust snippet included, every link resolves")
