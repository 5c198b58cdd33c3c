#!/usr/bin/env bash
# npm run test:stress: the whole suite (npm test) several times in a row while CPU hogs keep the machine busy, to
# show that no test depends on the machine being idle (timing, wall-clock asserts, short waits). CONTRIBUTING.md.
#   STRESS_RUNS (default 3)  runs of npm test; the first failure stops it with a non-zero exit
#   STRESS_HOGS (default 2)  `yes > /dev/null` processes started here and stopped by their PIDs at the end
set -euo pipefail
runs="${STRESS_RUNS:-3}"
hogs="${STRESS_HOGS:-2}"
pids=()
stop_hogs() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 "$hogs"); do
  yes > /dev/null &
  pids+=("$!")
done
for run in $(seq 1 "$runs"); do
  echo "== test:stress: run $run of $runs, under $hogs CPU hogs (PIDs ${pids[*]})"
  started=$(date +%s)
  if ! npm test; then
    echo "test:stress: run $run of $runs failed"
    exit 1
  fi
  echo "== test:stress: run $run passed in $(( $(date +%s) - started )) s"
done
echo "test:stress: $runs of $runs runs passed"
