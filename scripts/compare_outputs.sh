#!/usr/bin/env bash
# Writes every report xlens makes for every profile of testdata/ and ../shared/real/ into one
# folder, so that two builds can be compared byte for byte (a refactor must not move a byte):
#
#   scripts/compare_outputs.sh OLD_XLENS /tmp/before
#   scripts/compare_outputs.sh NEW_XLENS /tmp/after
#   diff -r /tmp/before /tmp/after && echo identical
#
# Per profile directory: `scan` as text, JSON and HTML, its Parquet dataset (`--out`), `ops`,
# `hlo`, `kernels` and `inventory` as text and JSON, each command's exit status and stderr; then
# `diff` of a few pairs (text, JSON, HTML, Parquet) and `runs` of a logdir. Parquet files are
# written under names unique to each scan (and carry that id in their `scan` column), so they are
# compared through a dump: each file's rows as CSV, the `scan` column left out, under its
# table/partition path. The dump needs Python with polars: PYTHON (default `python3`); without
# polars the Parquet part is skipped with a note.
set -euo pipefail
xlens="$(realpath "$1")"
out="$2"
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
mkdir -p "$out"
cd "$root"

# Every directory that holds host files (`*.xplane.pb`), once, in a stable order.
dirs() {
  for base in testdata ../shared/real; do
    [ -d "$base" ] && find "$base" -name '*.xplane.pb' -printf '%h\n'
  done | sort -u
}

dump_parquet() { # DIR -> DIR.txt: every Parquet file's rows, `scan` column dropped
  local dir="$1"
  if ! "$python" -c 'import polars' 2>/dev/null; then
    echo "note: no polars for $python; Parquet not compared" >"$dir.txt"
    rm -rf "$dir"
    return
  fi
  "$python" - "$dir" >"$dir.txt" <<'EOF'
import pathlib, sys
import polars as pl
root = pathlib.Path(sys.argv[1])
for path in sorted(root.rglob("*.parquet")):
    rel = path.parent.relative_to(root)
    df = pl.read_parquet(path)
    df = df.drop([c for c in ("scan",) if c in df.columns])
    print(f"== {rel} {df.schema}")
    print(df.write_csv(), end="")
EOF
  rm -rf "$dir"
}

run() { # NAME CMD...: stdout to NAME.out, stderr to NAME.err, status to NAME.rc
  local name="$1"
  shift
  local rc=0
  "$@" >"$name.out" 2>"$name.err" || rc=$?
  echo "$rc" >"$name.rc"
}

export XLENS_CACHE_DIR="$out/.cache"
for d in $(dirs); do
  slug="$(echo "$d" | sed 's#^\.\./shared/#shared/#; s#/#__#g')"
  o="$out/$slug"
  mkdir -p "$o"
  run "$o/scan_text" "$xlens" scan --quiet "$d"
  run "$o/scan_json" "$xlens" scan --quiet --json --html "$o/scan.html" --out "$o/frames" "$d"
  dump_parquet "$o/frames"
  for c in ops hlo kernels inventory; do
    run "$o/${c}_text" "$xlens" "$c" "$d"
    run "$o/${c}_json" "$xlens" "$c" --json "$d"
  done
done

pairs=(
  "testdata/h200/h200_bf16_graphs testdata/h200/h200_bf16_no_graphs"
  "testdata/corpus/host_callback testdata/corpus/barrier_in_loop"
  "testdata/corpus/recompilation testdata/corpus/recompilation"
)
i=0
for p in "${pairs[@]}"; do
  set -- $p
  [ -d "$1" ] && [ -d "$2" ] || continue
  o="$out/diff_$i"
  mkdir -p "$o"
  run "$o/diff_text" "$xlens" diff "$1" "$2"
  run "$o/diff_json" "$xlens" diff --json --html "$o/diff.html" --out "$o/frames" "$1" "$2"
  dump_parquet "$o/frames"
  i=$((i + 1))
done

# `runs` over a logdir whose runs are the corpus' profiles (no cache: the summaries are new).
logdir="$(mktemp -d)"
mkdir -p "$logdir/plugins/profile"
for r in host_callback recompilation barrier_in_loop; do
  [ -d "testdata/corpus/$r" ] && cp -a "testdata/corpus/$r" "$logdir/plugins/profile/$r"
done
run "$out/runs_text" "$xlens" runs --no-cache "$logdir"
run "$out/runs_json" "$xlens" runs --no-cache --json "$logdir"
rm -rf "$logdir" "$out/.cache"
# Paths of the temporary logdir differ between runs: name it by a placeholder.
sed -i "s#$logdir#LOGDIR#g" "$out"/runs_* 2>/dev/null || true
echo "wrote $(find "$out" -type f | wc -l) files under $out"
