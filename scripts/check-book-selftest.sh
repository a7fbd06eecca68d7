#!/usr/bin/env bash
# The book checker must reject an inline Rust block, a missing include
# anchor, a broken link, a missing chapter and a command-line flag the
# reference does not describe, and accept a clean book.
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir/src"
printf 'fn f() {}\n// ANCHOR: a\nfn g() {}\n// ANCHOR_END: a\n' > "$dir/code.rs"
printf '# Summary\n\n- [One](one.md)\n' > "$dir/src/SUMMARY.md"
printf '# One\n\n## Part two\n\n```rust\n{{#include ../code.rs:a}}\n```\n\nSee [two](one.md#part-two).\n' > "$dir/src/one.md"
python3 "$here/check-book.py" "$dir/src" >/dev/null
check_rejects() {
  if python3 "$here/check-book.py" "$dir/src" 2>/dev/null; then echo "not rejected: $1"; exit 1; fi
}
cp "$dir/src/one.md" "$dir/one.bak"
printf '\n```rust\nfn inline() {}\n```\n' >> "$dir/src/one.md"; check_rejects "inline rust"; cp "$dir/one.bak" "$dir/src/one.md"
sed -i 's/code.rs:a/code.rs:b/' "$dir/src/one.md"; check_rejects "missing anchor"; cp "$dir/one.bak" "$dir/src/one.md"
sed -i 's/#part-two/#part-three/' "$dir/src/one.md"; check_rejects "broken anchor"; cp "$dir/one.bak" "$dir/src/one.md"
printf -- '- [Two](two.md)\n' >> "$dir/src/SUMMARY.md"; check_rejects "missing chapter"
# The reference chapter must describe every flag of `cargo cmc ... --help`:
# the real chapter passes, and without its `--emit-test` row it is rejected.
printf '# Summary\n\n- [Reference](reference.md)\n' > "$dir/src/SUMMARY.md"
rm "$dir/src/one.md"
sed 's/](\([^)]*\))/](reference.md)/g' "$here/../book/src/reference.md" > "$dir/src/reference.md"
CMC_BOOK_WORKSPACE="$here/.." python3 "$here/check-book.py" "$dir/src" >/dev/null
grep -v '^| `--emit-test' "$dir/src/reference.md" > "$dir/ref.md"; mv "$dir/ref.md" "$dir/src/reference.md"
if CMC_BOOK_WORKSPACE="$here/.." python3 "$here/check-book.py" "$dir/src" 2>/dev/null; then
  echo "not rejected: a flag missing from the reference"; exit 1
fi
echo "book checker self-test passed"
