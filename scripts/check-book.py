#!/usr/bin/env python3
"""Checks the book: every fenced Rust block is only {{#include}} lines (so
every snippet comes from a file the workspace compiles and tests), every
include names an existing file and anchor, and every internal link and image
resolves (with its #anchor, for links to chapters), and every flag that
`cargo cmc <subcommand> --help` prints appears in the reference chapter (inside a `code span`)."""
import pathlib
import re
import subprocess
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

# Every flag of every subcommand, as `--help` prints it, in the reference
# chapter (inside a code span: `--flag`, `-p, --package <SPEC>`). The command-line tool is run through
# cargo (built if it is not yet), from the workspace the book belongs to.
flags_checked = 0
reference = SRC / "reference.md"
import os
WORKSPACE = pathlib.Path(os.environ.get("CMC_BOOK_WORKSPACE", SRC.parent.parent)).resolve()
if reference.exists() and (WORKSPACE / "cargo-cmc").is_dir():
    ref_text = reference.read_text()
    def help_of(*args):
        out = subprocess.run(
            ["cargo", "run", "-q", "--release", "-p", "cargo-cmc", "--", "cmc", *args, "--help"],
            cwd=WORKSPACE, capture_output=True, text=True)
        if out.returncode != 0:
            errors.append(f"cargo cmc {' '.join(args)} --help failed: {out.stderr.strip()}")
            return ""
        return out.stdout
    top = help_of()
    commands = re.findall(r"^  ([a-z][a-z-]*)\s", top.split("Commands:")[-1].split("Options:")[0], flags=re.M)
    if not commands:
        errors.append("cargo cmc --help lists no subcommand")
    for cmd in commands:
        if cmd == "help":
            continue
        for flag in re.findall(r"^\s+(?:-\w, )?(--[a-z0-9][a-z0-9-]*)", help_of(cmd), flags=re.M):
            if flag in ("--help", "--version"):
                continue
            flags_checked += 1
            if not re.search(r"`[^`\n]*" + re.escape(flag) + r"(?![\w-])", ref_text):
                errors.append(f"reference.md: `cargo cmc {cmd} {flag}` is not described")

for e in errors:
    print("book:", e, file=sys.stderr)
if errors:
    sys.exit(1)
print(f"book: {len(chapters)} chapters, every Rust snippet included, every link resolves, "
      f"{flags_checked} command-line flags described")
