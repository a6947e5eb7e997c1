# Sourced by bench/grpc.sh and bench/paired.sh: a scratch directory ($work) and the processes
# the script starts ($pids: append each one's pid), stopped and removed when the script exits.
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT

# Waits up to 10 s for <url> to answer 2xx; false (the caller says what failed) if it never does.
answers() {
  for _ in $(seq 100); do
    curl -fsS "$1" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  curl -fsS "$1" >/dev/null 2>&1
}
