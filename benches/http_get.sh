#!/usr/bin/env bash
# GET /agents/{id} throughput over HTTP (BENCHMARKS.md, case d).
#
# Builds the release binary and the store bench, fills a fresh data
# directory with AGENTMESH_BENCH_AGENTS agents (`store fill`, the same
# records Registry::register writes), starts the real `agentmesh node` on
# it, waits until the node's own startup work is done, and drives it with
# wrk requesting random existing ids (benches/http_get.lua). Prints wrk's
# report and a one-line summary with the node's CPU use. The node is
# stopped and the data removed on exit, whatever happens.
#
#   benches/http_get.sh                        # 100000 agents, 2 threads, 64 connections, 15 s
#   AGENTMESH_BENCH_AGENTS=2000 WRK_DURATION=3s benches/http_get.sh
#   AGENTMESH_BENCH_AGENTS=1000000 AGENTMESH_BENCH_DATA=/path/to/data benches/http_get.sh
#       # a data directory already holding the population (e.g. from
#       # `agentmesh import` of `store ndjson FILE N`): no fill; kept at exit
#
# Needs wrk (Debian: apt-get install -y wrk), curl and bc.
set -euo pipefail

AGENTS=${AGENTMESH_BENCH_AGENTS:-100000}
THREADS=${WRK_THREADS:-2}
CONNECTIONS=${WRK_CONNECTIONS:-64}
DURATION=${WRK_DURATION:-15s}
BASE_DIR=${AGENTMESH_BENCH_DIR:-${TMPDIR:-/tmp}}

case "$DURATION" in
    *[!0-9]*s | s | *[!s]) echo "error: WRK_DURATION must be whole seconds, like 15s" >&2; exit 1 ;;
esac

cd "$(dirname "$0")/.."
for tool in wrk curl bc; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not installed" >&2; exit 1; }
done

WORK=$(mktemp -d "$BASE_DIR/agentmesh-http-bench.XXXXXX")
NODE_PID=
cleanup() {
    if [ -n "$NODE_PID" ] && kill -0 "$NODE_PID" 2>/dev/null; then
        kill -TERM "$NODE_PID" 2>/dev/null || true
        for _ in $(seq 100); do
            kill -0 "$NODE_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$NODE_PID" 2>/dev/null || true
        wait "$NODE_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== building (release)"
cargo build --release --bin agentmesh
cargo bench --bench store --no-run
# The same build again (a no-op) to learn where the bench binary is.
BENCH_BIN=$(cargo bench --bench store --no-run --message-format=json 2>/dev/null \
    | grep '"kind":\["bench"\]' | grep -o '"executable":"[^"]*"' | cut -d'"' -f4 | tail -n 1 \
    || true)
[ -x "$BENCH_BIN" ] || { echo "error: could not find the store bench binary" >&2; exit 1; }

DATA=${AGENTMESH_BENCH_DATA:-$WORK/data}
if [ -z "${AGENTMESH_BENCH_DATA:-}" ]; then
    echo "== filling $DATA with $AGENTS agents"
    "$BENCH_BIN" fill "$DATA" "$AGENTS"
else
    echo "== using $DATA as it is (expected to hold $AGENTS agents)"
fi

echo "== starting the node"
start=$(date +%s.%N)
# Port 0 everywhere: the API port is read back from the node's banner, and
# the libp2p listener must not collide with another node on this machine.
target/release/agentmesh node --data-dir "$DATA" --listen 127.0.0.1:0 \
    --p2p-listen /ip4/127.0.0.1/tcp/0 >"$WORK/node.out" 2>"$WORK/node.err" &
NODE_PID=$!
URL=
for _ in $(seq 600); do
    URL=$(grep -o 'http://[0-9.:]*' "$WORK/node.out" 2>/dev/null | head -n 1 || true)
    [ -n "$URL" ] && break
    kill -0 "$NODE_PID" 2>/dev/null || { cat "$WORK/node.err" >&2; echo "error: the node exited" >&2; exit 1; }
    sleep 0.1
done
[ -n "$URL" ] || { cat "$WORK/node.err" >&2; echo "error: the node did not start within 60 s" >&2; exit 1; }
ready=$(date +%s.%N)
printf 'node %s ready in %.2f s (opening the store included)\n' "$URL" "$(echo "$ready - $start" | bc -l)"
curl -sf "$URL/health" | grep -o '"records":[0-9]*' \
    || { echo "error: GET /health failed" >&2; exit 1; }
curl -sf "$URL/agents/demo-00000" >/dev/null \
    || { echo "error: GET /agents/demo-00000 failed" >&2; exit 1; }

# CPU time (utime + stime, in clock ticks) the node has used so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TCK=$(getconf CLK_TCK)

# Measure the steady state: after start the node does work of its own
# (it republishes every record it signed to the mesh: about 20 s of one
# core for 100000 records). Wait until it uses under 5% of a core.
echo "== waiting for the node to go idle (startup work, e.g. republishing its records)"
settle_start=$(date +%s)
prev=$(cpu_ticks "$NODE_PID")
while :; do
    sleep 1
    now=$(cpu_ticks "$NODE_PID")
    [ $((now - prev)) -le $((TCK / 20)) ] && break
    prev=$now
    if [ $(($(date +%s) - settle_start)) -ge 300 ]; then
        echo "warning: the node is still busy after 300 s; measuring anyway" >&2
        break
    fi
done
echo "idle after $(($(date +%s) - settle_start)) s"

ticks_before=$(cpu_ticks "$NODE_PID")

echo "== wrk -t$THREADS -c$CONNECTIONS -d$DURATION --latency (random ids of $AGENTS)"
AGENTMESH_BENCH_AGENTS=$AGENTS wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency \
    -s benches/http_get.lua "$URL" | tee "$WORK/wrk.out"

ticks_after=$(cpu_ticks "$NODE_PID")
seconds=${DURATION%s}
node_cpu=$(echo "($ticks_after - $ticks_before) / $TCK / $seconds" | bc -l)
rps=$(awk '/^Requests\/sec:/ {print $2}' "$WORK/wrk.out")
p50=$(awk '$1 == "50%" {print $2}' "$WORK/wrk.out")
p99=$(awk '$1 == "99%" {print $2}' "$WORK/wrk.out")
errors=$(awk '/Non-2xx|Socket errors/' "$WORK/wrk.out")
echo
printf 'GET /agents/{id}: %s requests/s, p50 %s, p99 %s; node used %.2f of %s cores\n' \
    "$rps" "$p50" "$p99" "$node_cpu" "$(nproc)"
if [ -n "$errors" ]; then
    echo "errors: $errors"
    exit 1
fi
