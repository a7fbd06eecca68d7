#!/usr/bin/env bash
# The book checker must reject an inline Rust block, a missing include
# anchor, a broken link and a missing chapter, and accept a clean book.
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
echo "book checker self-test passed"
