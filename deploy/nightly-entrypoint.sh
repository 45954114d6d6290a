#!/bin/sh
# The nightly run: one report folder per night under $GPU_CONFORMANCE_REPORTS, compared with the newest
# earlier night (--baseline), then the history page of every night kept.
#
#   nightly-entrypoint.sh [COMMAND ARGS...]     default command: pytest --cluster=current
#
# Nights are folders named by their UTC start time (20261202T023000Z, then -1, -2 ... when a second run
# starts within the same second), so name order is time order. The baseline is the newest earlier folder
# that holds a conformance.json: a night that died before writing one is never a baseline, and a night
# whose run failed (verdict ERROR) is skipped too, so one bad night does not hide what changed since the
# last real verdict. The exit code is the run's (0 conformant, 1 not conformant, 2+ the run failed):
# the CronJob's Job fails on a non-conformant night, and the history page is written either way.
set -u

reports="${GPU_CONFORMANCE_REPORTS:-/reports}"
keep="${GPU_CONFORMANCE_KEEP_NIGHTS:-30}"

case "$keep" in
  ''|*[!0-9]*|0) echo "nightly: GPU_CONFORMANCE_KEEP_NIGHTS must be a whole number above 0, not '$keep'" >&2; exit 4 ;;
esac
if ! mkdir -p "$reports" 2>/dev/null || [ ! -w "$reports" ]; then
  echo "nightly: report folder $reports is not writable" >&2
  exit 4
fi

# Night folders, oldest first (only names this script makes: nothing else in $reports is touched).
nights() {
  for d in "$reports"/[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]T[0-9][0-9][0-9][0-9][0-9][0-9]Z*; do
    [ -d "$d" ] && printf '%s\n' "$d"
  done | LC_ALL=C sort
}

# The newest night with a real verdict. "verdict": "ERROR" is what a run that ended before a verdict writes.
baseline="$(nights | while IFS= read -r d; do
  if [ -f "$d/conformance.json" ] && ! grep -q '"verdict": *"ERROR"' "$d/conformance.json"; then
    printf '%s\n' "$d/conformance.json"
  fi
done | tail -n 1)"

stamp="$(date -u +%Y%m%dT%H%M%SZ)"
night="$reports/$stamp"
n=0
# mkdir is atomic: two runs starting in the same second still get folders of their own.
until mkdir "$night" 2>/dev/null; do
  n=$((n + 1))
  night="$reports/$stamp-$n"
  [ "$n" -lt 100 ] || { echo "nightly: cannot create a folder under $reports" >&2; exit 4; }
done

[ "$#" -gt 0 ] || set -- pytest --cluster=current
set -- "$@" "--report-dir=$night"
if [ -n "$baseline" ]; then
  set -- "$@" "--baseline=$baseline"
  echo "nightly: this night is $night; baseline $baseline" >&2
else
  echo "nightly: this night is $night; no earlier night to compare with" >&2
fi

"$@"
rc=$?

# Keep the newest $keep nights (this one included).
count=$(nights | wc -l)
if [ "$count" -gt "$keep" ]; then
  nights | head -n "$((count - keep))" | while IFS= read -r old; do rm -rf -- "$old"; done
fi

# The history page is a convenience: its failure is reported, never turned into the night's verdict.
gpu-conformance report history "$reports" "--output=$reports/history.html" >&2 \
  || echo "nightly: the history page could not be written (see above)" >&2

exit "$rc"
