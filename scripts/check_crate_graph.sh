#!/usr/bin/env bash
# The crate graph of ARCHITECTURE.md, checked with `cargo tree` (run by .ci/run):
# - dependencies run one way: xplane <- hlo <- roofline <- faults <- report <- facade, chips below
#   roofline and budget, source beside them on xplane alone, capture (the profiler service's
#   client) beside them on none;
# - no crate but source and capture brings a network client (ureq, object_store, hyper, reqwest,
#   rustls, h2, tonic), and
#   xplane with its default features (its optional `frames` is polars, which runs a tokio pool
#   inside) brings no async runtime either;
# - budget needs the chip catalogue only, never the decoder or HLO.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
# The workspace crates a crate depends on (normal dependencies, any depth), one per line.
deps() { cargo tree -p "$1" -e normal --prefix none "${@:2}" | awk '{print $1}' | grep '^xlens-' | grep -vx "$1" | sort -u || true; }
# allowed CRATE ALLOWED...: fails when CRATE depends on a workspace crate outside ALLOWED.
allowed() {
  local crate=$1
  shift
  local extra
  extra=$(deps "$crate" | grep -vxF -f <(printf '%s\n' "$@") || true)
  if [ -n "$extra" ]; then
    echo "crate graph: $crate depends on $(echo "$extra" | tr '\n' ' ')(allowed: $*)" >&2
    fail=1
  fi
}
allowed xlens-chips -
allowed xlens-xplane -
allowed xlens-source xlens-xplane
allowed xlens-capture -
allowed xlens-hlo xlens-xplane
allowed xlens-roofline xlens-xplane xlens-hlo xlens-chips
allowed xlens-budget xlens-chips
allowed xlens-faults xlens-xplane xlens-hlo xlens-chips xlens-roofline
allowed xlens-report xlens-xplane xlens-hlo xlens-chips xlens-roofline xlens-budget xlens-faults
network='^(ureq|object_store|hyper|reqwest|rustls|h2|tonic) '
for crate in xlens-chips xlens-xplane xlens-hlo xlens-roofline xlens-budget xlens-faults xlens-report; do
  if cargo tree -p "$crate" -e normal --prefix none | grep -E "$network" >/dev/null; then
    echo "crate graph: $crate brings a network client" >&2
    fail=1
  fi
done
if cargo tree -p xlens-xplane -e normal --prefix none | grep -E "$network|^tokio " >/dev/null; then
  echo "crate graph: xlens-xplane (default features) brings a network or async crate" >&2
  fail=1
fi
[ "$fail" = 0 ] && echo "crate graph: one way, network I/O in xlens-source and xlens-capture only"
exit "$fail"
