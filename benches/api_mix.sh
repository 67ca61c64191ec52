#!/usr/bin/env bash
# The API under load, with and without authentication (BENCHMARKS.md,
# "API under load"): one node holding AGENTMESH_BENCH_AGENTS agents
# (imported from benches/api_mix_population.py), driven by wrk with a
# realistic read mix (benches/api_mix.lua: get, filter, free-text search,
# resolve) for WRK_DURATION at WRK_CONNECTIONS connections, twice in one
# run on the same data:
#   open  - a loopback node with no credentials (nothing checked);
#   auth  - the same node with api.public_reads = false and an API key of
#           the read scope on every request (every request authenticated).
# Both runs keep the rate limits on, set wide (budgets no client of this
# run can reach), so their cost is in both. Prints, per run: requests/s,
# p50, p99, p99.9, errors (socket errors and non-2xx) and the node's peak
# RSS, and the machine.
#
#   benches/api_mix.sh                                    # 100000 agents, 256 connections, 60 s
#   AGENTMESH_BENCH_AGENTS=5000 WRK_DURATION=5s benches/api_mix.sh
#
# Needs wrk (Debian: apt-get install -y wrk), curl and python3.
set -euo pipefail

AGENTS=${AGENTMESH_BENCH_AGENTS:-100000}
THREADS=${WRK_THREADS:-2}
CONNECTIONS=${WRK_CONNECTIONS:-256}
DURATION=${WRK_DURATION:-60s}
BASE_DIR=${AGENTMESH_BENCH_DIR:-${TMPDIR:-/tmp}}

cd "$(dirname "$0")/.."
for tool in wrk curl python3; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not installed" >&2; exit 1; }
done

WORK=$(mktemp -d "$BASE_DIR/agentmesh-api-mix.XXXXXX")
NODE_PID=
stop_node() {
    if [ -n "$NODE_PID" ] && kill -0 "$NODE_PID" 2>/dev/null; then
        kill -TERM "$NODE_PID" 2>/dev/null || true
        for _ in $(seq 200); do
            kill -0 "$NODE_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$NODE_PID" 2>/dev/null || true
        wait "$NODE_PID" 2>/dev/null || true
    fi
    NODE_PID=
}
cleanup() {
    stop_node
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== building (release)"
cargo build --release --locked --bin agentmesh
BIN=target/release/agentmesh

DATA=$WORK/data
echo "== importing $AGENTS agents"
python3 benches/api_mix_population.py "$AGENTS" >"$WORK/agents.ndjson"
"$BIN" import --data-dir "$DATA" "$WORK/agents.ndjson" >/dev/null

# Budgets nobody in this run reaches, and room for every connection.
export AGENTMESH_API__LIMITS__READS=100000000
export AGENTMESH_API__LIMITS__TEXT_SEARCH=100000000
export AGENTMESH_API__LIMITS__RESOLVE=100000000
export AGENTMESH_API__LIMITS__DAILY_QUOTA=1000000000000
export AGENTMESH_API__MAX_CONNECTIONS_PER_IP=4096
export AGENTMESH_API__MAX_CONCURRENT_REQUESTS=4096

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TCK=$(getconf CLK_TCK)

start_node() {
    "$BIN" node --data-dir "$DATA" --listen 127.0.0.1:0 \
        --p2p-listen /ip4/127.0.0.1/tcp/0 "$@" >"$WORK/node.out" 2>"$WORK/node.err" &
    NODE_PID=$!
    URL=
    for _ in $(seq 600); do
        URL=$(grep -o 'http://[0-9.:]*' "$WORK/node.out" 2>/dev/null | head -n 1 || true)
        [ -n "$URL" ] && break
        kill -0 "$NODE_PID" 2>/dev/null || { cat "$WORK/node.err" >&2; echo "error: the node exited" >&2; exit 1; }
        sleep 0.1
    done
    [ -n "$URL" ] || { echo "error: the node did not start within 60 s" >&2; exit 1; }
    # Measure the steady state: wait until the node's own startup work
    # (republishing its records) is done.
    local prev now waited=0
    prev=$(cpu_ticks "$NODE_PID")
    while :; do
        sleep 1
        waited=$((waited + 1))
        now=$(cpu_ticks "$NODE_PID")
        [ $((now - prev)) -le $((TCK / 20)) ] && break
        prev=$now
        [ $waited -ge 300 ] && { echo "warning: still busy after 300 s; measuring anyway" >&2; break; }
    done
}

run_mix() {
    local mode=$1 token=$2
    local auth=()
    [ -n "$token" ] && auth=(-H "Authorization: Bearer $token")
    curl -sf "${auth[@]}" "$URL/agents/bench-000000" >/dev/null \
        || { echo "error: GET /agents/bench-000000 failed ($mode)" >&2; exit 1; }
    echo "== $mode: wrk -t$THREADS -c$CONNECTIONS -d$DURATION"
    AGENTMESH_BENCH_AGENTS=$AGENTS AGENTMESH_BENCH_TOKEN=$token \
        wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --timeout 10s \
        -s benches/api_mix.lua "$URL" | tee "$WORK/wrk-$mode.out"
    local rss non2xx line
    rss=$(awk '/^VmHWM:/ {print $2}' "/proc/$NODE_PID/status")
    non2xx=$(awk '/Non-2xx or 3xx responses:/ {print $5}' "$WORK/wrk-$mode.out")
    line=$(grep '^MIX ' "$WORK/wrk-$mode.out")
    RESULTS+=("$(printf '%s %s rss_kib=%s non2xx=%s rps=%s' "$mode" "$line" "$rss" "${non2xx:-0}" \
        "$(awk '/^Requests\/sec:/ {print $2}' "$WORK/wrk-$mode.out")")")
}

RESULTS=()
# A first start builds what the import left for it (the text index): done
# once here, unmeasured, so that both measured runs start alike.
echo "== first start (unmeasured)"
start_node
records=$(curl -sf "$URL/health" | grep -o '"records":[0-9]*' | cut -d: -f2)
[ "$records" = "$AGENTS" ] || { echo "error: the node holds $records records, not $AGENTS" >&2; exit 1; }
stop_node

echo "== open: no credentials"
start_node
run_mix open ""
stop_node

echo "== auth: every request carries an API key (public reads off)"
TOKEN=$("$BIN" keys create --data-dir "$DATA" --name bench --scope read)
AGENTMESH_API__PUBLIC_READS=false start_node
run_mix auth "$TOKEN"
stop_node

echo
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
echo "agents: $AGENTS; wrk: $THREADS threads, $CONNECTIONS connections, $DURATION"
printf '%-5s %10s %9s %9s %9s %8s %10s\n' mode req/s p50_ms p99_ms p99.9_ms errors peak_rss_MiB
for r in "${RESULTS[@]}"; do
    python3 - "$r" <<'PY'
import sys
parts = sys.argv[1].split()
mode = parts[0]
kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
errors = sum(int(kv[k]) for k in ("errors_connect", "errors_read", "errors_write", "errors_timeout")) + int(kv["non2xx"])
print(f"{mode:<5} {float(kv['rps']):>10.0f} {int(kv['p50_us'])/1000:>9.2f} {int(kv['p99_us'])/1000:>9.2f} "
      f"{int(kv['p999_us'])/1000:>9.2f} {errors:>8} {int(kv['rss_kib'])/1024:>10.0f}")
PY
done
