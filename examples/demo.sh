#!/usr/bin/env bash
# clawsmith's main job on its embedded defaults: one real turn against a copy of the example
# workspace (parallel reads and a search, an edit, a sandboxed command), then an undo of the turn.
# State goes to a throwaway SQLite database; nothing outside a temp dir is touched.
set -euo pipefail
cd "$(dirname "$0")/.."

# The dev profile (dependencies optimized, see Cargo.toml) builds much faster than release and
# shares its artifacts with `cargo xtask ci`. CLAWSMITH_BIN names an already built binary
# instead (the CLI's tests run this script that way).
if [ -n "${CLAWSMITH_BIN:-}" ]; then
  clawsmith="$CLAWSMITH_BIN"
else
  # cargo's own progress shows on a terminal; the first build takes 15–20 minutes on two cores.
  echo "== building clawsmith (dev profile; a first build takes 15-20 minutes on two cores)" >&2
  cargo build -p clawsmith-cli
  clawsmith="${CARGO_TARGET_DIR:-$PWD/target}/debug/clawsmith"
  echo "== using $clawsmith (the README's examples use the release build: cargo build --release -p clawsmith-cli)" >&2
fi

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cp -R examples/demo-workspace "$scratch/workspace"
export CLAWSMITH_STATE_DIR="$scratch/state"

echo "== clawsmith turn (mode full, sandbox required)"
"$clawsmith" turn --workspace "$scratch/workspace" --mode full --pretty --json \
  < examples/demo-turn.json > "$scratch/turn.out"
grep -v '^{"type":"turn.result"' "$scratch/turn.out"
turn_id="$(tail -n 1 "$scratch/turn.out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["turnId"])')"

echo
echo "== clawsmith undo list"
"$clawsmith" undo list
echo
echo "== clawsmith undo diff $turn_id greet.py"
"$clawsmith" undo diff "$turn_id" greet.py
echo
echo "== clawsmith undo all $turn_id"
"$clawsmith" undo all "$turn_id" --workspace "$scratch/workspace"
if diff -r examples/demo-workspace "$scratch/workspace" > /dev/null; then
  echo "workspace is back to its original state"
else
  echo "workspace differs from the original after undo" >&2
  exit 1
fi
