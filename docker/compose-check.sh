#!/usr/bin/env bash
# The docker-compose mesh, end to end (CI runs it from .ci/run after the
# tests):
#
#   docker/compose-check.sh [BINARY [TESTBED_BINARY]]
#
# BINARY is the node's (built with --no-default-features, as it ships),
# TESTBED_BINARY one built with the testbed feature; both default to
# target/debug/agentmesh.
#
# 1. builds the node's image from BINARY and the testbed's from
#    TESTBED_BINARY, offline (docker/build-offline.sh), and checks that the
#    node's image carries no testbed when BINARY was built without it;
# 2. `docker-compose -p agentmesh-ci up -d`: the testbed and node1..3;
# 3. waits until every node has crawled its organisation (a report for
#    every domain of orgN.domains; healthy agents key-verified, the
#    testbed's broken ones not) and is connected to the two others;
# 4. searches node1 (scope mesh) for a capability of agents node3 crawled:
#    they must come back with source "mesh", attested by node3's key, and
#    node1 must never have crawled them; the same from node3 for node1's;
# 5. kills node2 and checks that those searches on node1 and node3 still
#    answer, in time and with those agents (x-agentmesh-partial may say
#    partial);
# 6. always tears down (down -v: containers, volumes, network), also on
#    failure or Ctrl-C, after printing the containers' last log lines when
#    something failed.
#
# Every wait polls a condition with a deadline. Exit 0 when every check
# passed; otherwise 1 with what failed. Variables: AGENTMESH_CI_PROJECT
# (agentmesh-ci), AGENTMESH_IMAGE (agentmesh:ci), AGENTMESH_TESTBED_IMAGE
# (agentmesh-testbed:ci), AGENTMESH_NET_PREFIX
# (172.29.78, a /24 apart from the default compose mesh's).
set -euo pipefail
cd "$(dirname "$0")/.."

project=${AGENTMESH_CI_PROJECT:-agentmesh-ci}
binary=${1:-${CARGO_TARGET_DIR:-target}/debug/agentmesh}
testbed_binary=${2:-$binary}
export AGENTMESH_IMAGE=${AGENTMESH_IMAGE:-agentmesh:ci}
export AGENTMESH_TESTBED_IMAGE=${AGENTMESH_TESTBED_IMAGE:-agentmesh-testbed:ci}
export AGENTMESH_NET_PREFIX=${AGENTMESH_NET_PREFIX:-172.29.78}
# Any free host ports, so that a mesh a developer runs does not collide.
export AGENTMESH_NODE1_PORT="" AGENTMESH_NODE2_PORT="" AGENTMESH_NODE3_PORT=""
# The testbed's default broken agents (agentmesh testbed --broken).
broken_re='^(txt-missing|fingerprint-mismatch|wrong-domain|challenge-bad-signature)-'

started=$(date +%s)
elapsed() { echo $(($(date +%s) - started)); }
phase() { echo "== [$(elapsed)s] $*"; }
fail() {
    echo "compose-check: FAILED: $*" >&2
    exit 1
}
compose() { docker-compose -p "$project" -f docker-compose.yml "$@"; }

for tool in docker docker-compose curl jq; do
    command -v "$tool" >/dev/null || fail "$tool is not installed"
done
docker info >/dev/null 2>&1 || fail "no Docker daemon answers (docker info failed)"

phase "building $AGENTMESH_IMAGE offline from $binary"
image_started=$(date +%s)
docker/build-offline.sh --tag "$AGENTMESH_IMAGE" "$binary"
if [ "$testbed_binary" != "$binary" ]; then
    phase "building $AGENTMESH_TESTBED_IMAGE offline from $testbed_binary"
    docker/build-offline.sh --tag "$AGENTMESH_TESTBED_IMAGE" "$testbed_binary"
    # The node's image is the one that ships: no testbed in it.
    if docker run --rm --entrypoint agentmesh "$AGENTMESH_IMAGE" testbed --help >/dev/null 2>&1; then
        fail "$AGENTMESH_IMAGE has the testbed subcommand: build BINARY with --no-default-features"
    fi
else
    docker tag "$AGENTMESH_IMAGE" "$AGENTMESH_TESTBED_IMAGE"
fi
image_seconds=$(($(date +%s) - image_started))

tmp=$(mktemp -d)
teardown() {
    local rc=$?
    trap - EXIT INT TERM
    if [ "$rc" -ne 0 ]; then
        echo "--- the containers' last log lines" >&2
        compose logs --no-color --tail=40 >&2 || true
    fi
    phase "tearing down (down -v)"
    compose down -v --remove-orphans >/dev/null 2>&1 || true
    docker network rm "${project}_mesh" >/dev/null 2>&1 || true
    rm -rf "$tmp"
    if [ "$rc" -eq 0 ]; then
        echo "compose-check: PASSED in $(elapsed)s (image ${image_seconds}s, mesh up and crawled in ${mesh_seconds:-?}s)"
    else
        echo "compose-check: FAILED after $(elapsed)s (exit $rc)" >&2
    fi
    exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT TERM

# A run that was interrupted before its teardown leaves nothing behind
# that this one trips on.
compose down -v --remove-orphans >/dev/null 2>&1 || true

phase "docker-compose -p $project up -d (network ${AGENTMESH_NET_PREFIX}.0/24)"
mesh_started=$(date +%s)
compose up -d

# poll SECONDS WHAT COMMAND...: runs COMMAND every 0.5 s until it
# succeeds; fails naming WHAT after SECONDS.
poll() {
    local limit=$1 what=$2
    shift 2
    local deadline=$(($(date +%s) + limit))
    until "$@"; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "gave up after ${limit}s waiting for $what"
        sleep 0.5
    done
}

declare -A base peer
for n in 1 2 3; do
    addr=$(compose port "node$n" 7700) || fail "node$n publishes no API port"
    base[$n]="http://$addr"
done

# api N METHOD PATH [JSON]: sends the request to node N (at most 15 s);
# leaves the status in $status, the response headers in $headers and the
# body in $tmp/body (see `body`).
api() {
    local n=$1 method=$2 path=$3
    local -a args=(-sS --max-time 15 -X "$method" -D "$tmp/headers" -o "$tmp/body" -w '%{http_code}')
    [ $# -lt 4 ] || args+=(-H 'content-type: application/json' --data "$4")
    : >"$tmp/headers"
    : >"$tmp/body"
    status=$(curl "${args[@]}" "${base[$n]}$path" 2>"$tmp/curl-error") || status=000
    headers=$(tr -d '\r' <"$tmp/headers")
}
body() { cat "$tmp/body"; }
# The x-agentmesh-* headers of the last answer, on one line.
mesh_headers() { grep -i '^x-agentmesh' <<<"$headers" | tr '\n' ' ' || true; }

healthy() { api "$1" GET /health && [ "$status" = 200 ]; }
for n in 1 2 3; do
    poll 120 "node$n to answer GET /health on ${base[$n]}" healthy "$n"
    peer[$n]=$(body | jq -r .peer_id)
done
phase "nodes up: node1 ${peer[1]} (${base[1]}), node2 ${peer[2]} (${base[2]}), node3 ${peer[3]} (${base[3]})"

declare -A domains
for n in 1 2 3; do
    domains[$n]=$(compose exec -T testbed cat "/shared/org$n.domains") ||
        fail "cannot read org$n.domains from the testbed"
    [ -n "${domains[$n]}" ] || fail "org$n.domains is empty"
done

# crawled N: every domain of orgN has a crawl report on node N.
crawled() {
    local d
    for d in ${domains[$1]}; do
        api "$1" GET "/crawl/$d"
        [ "$status" = 200 ] || return 1
    done
}
for n in 1 2 3; do
    poll 120 "node$n to crawl the $(wc -w <<<"${domains[$n]}") domains of org$n" crawled "$n"
    verified=0 refused=0
    for d in ${domains[$n]}; do
        api "$n" GET "/crawl/$d"
        level=$(body | jq -r .trust.level)
        if [[ $d =~ $broken_re ]]; then
            case $level in key-verified | peer-verified) fail "node$n: the broken agent $d is $level" ;; esac
            refused=$((refused + 1))
        else
            case $level in key-verified | peer-verified) ;; *) fail "node$n: the healthy agent $d is $level" ;; esac
            verified=$((verified + 1))
        fi
    done
    phase "node$n crawled org$n: $verified agents key-verified, $refused broken ones not"
done

connected() { api "$1" GET /health && body | jq -e '.peers >= 2' >/dev/null; }
for n in 1 2 3; do
    poll 60 "node$n to be connected to the two other nodes" connected "$n"
done
mesh_seconds=$(($(date +%s) - mesh_started))
phase "every node is connected to the two others"

# own N: the key-verified agents of orgN that node N crawled itself
# (source "crawl"); their attested_by is node N's key fingerprint.
own() {
    api "$1" GET '/agents?limit=100'
    body | jq -c --arg org ".org$1.test" '[.[] | select(.source == "crawl" and (.id | endswith($org))
        and (.trust.level == "key-verified" or .trust.level == "peer-verified"))]'
}
search() {
    api "$1" POST /agents/search "{\"filters\":{\"capabilities\":[\"$2\"]},\"top\":100,\"scope\":\"mesh\"}"
}

# The capability most of a list's agents have.
top_capability() { jq -r '[.[].capabilities[]] | group_by(.) | max_by(length) | .[0]'; }

# found ASKER OWNER: ASKER's mesh search for capability[OWNER] returns
# every agent OWNER crawled with it (read again each time: expected[OWNER],
# key[OWNER]), each as source "mesh" attested by OWNER's key. A node that
# crawls an agent's mutual verified peer re-signs the agent's record as
# peer-verified, so which records are OWNER's own is read, not assumed.
found() {
    local asker=$1 owner=$2 mine
    mine=$(own "$owner")
    key[$owner]=$(jq -r '.[0].trust.attested_by[0] // empty' <<<"$mine")
    expected[$owner]=$(jq -c --arg c "${capability[$owner]}" \
        '[.[] | select(.capabilities | index($c)) | .id] | sort' <<<"$mine")
    [ "${expected[$owner]}" != "[]" ] || return 1
    search "$asker" "${capability[$owner]}"
    [ "$status" = 200 ] &&
        body | jq -e --argjson want "${expected[$owner]}" --arg key "${key[$owner]}" \
            '[.[] | select(.source == "mesh" and .trust.attested_by == [$key]) | .id] as $got
             | all($want[]; . as $w | $got | index($w))' >/dev/null
}

# check_found ASKER OWNER: ASKER finds OWNER's agents as source "mesh",
# attested by OWNER's key, a peer answered, and ASKER never crawled them.
check_found() {
    local asker=$1 owner=$2 results id answered
    poll 60 "node$asker's mesh search for ${capability[$owner]} to return what node$owner crawled with it, attested by node$owner" \
        found "$asker" "$owner"
    results=$(body)
    echo "   node$asker answered $(jq length <<<"$results") agents ($(mesh_headers))"
    jq -r '.[] | "     \(.id)  source=\(.source)  level=\(.trust.level)  attested_by=\(.trust.attested_by | join(","))"' <<<"$results"
    answered=$(sed -n 's/^x-agentmesh-peers-answered: *//Ip' <<<"$headers")
    [ "${answered:-0}" -ge 1 ] || fail "node$asker's mesh search was answered by no peer ($(mesh_headers))"
    for id in $(jq -r '.[]' <<<"${expected[$owner]}"); do
        api "$asker" GET "/crawl/${id#agent:}"
        [ "$status" = 404 ] ||
            fail "node$asker has a crawl report of ${id#agent:} (status $status); only node$owner crawls org$owner"
    done
    phase "node$asker found node$owner's agents ${expected[$owner]}: source mesh, attested by node$owner (${key[$owner]}), never crawled by node$asker"
}

declare -A key capability expected
for owner in 3 1; do
    mine=$(own "$owner")
    [ "$(jq length <<<"$mine")" -ge 1 ] || fail "node$owner lists no key-verified org$owner agent it crawled: $mine"
    capability[$owner]=$(top_capability <<<"$mine")
done
phase "searching node1 (scope mesh) for \"${capability[3]}\", a capability of agents node3 crawled"
check_found 1 3
phase "searching node3 (scope mesh) for \"${capability[1]}\", a capability of agents node1 crawled"
check_found 3 1

# Node2 goes away; the others keep answering, with what they know.
phase "docker-compose kill node2"
compose kill node2
node2_gone() { ! curl -s --max-time 2 -o /dev/null "${base[2]}/health"; }
poll 30 "node2 to stop answering" node2_gone
for pair in "1 3" "3 1"; do
    read -r asker owner <<<"$pair"
    cap=${capability[$owner]}
    t0=$(date +%s%N)
    search "$asker" "$cap"
    ms=$((($(date +%s%N) - t0) / 1000000))
    [ "$status" = 200 ] ||
        fail "node$asker's mesh search for $cap with node2 down answered $status: $(body) $(cat "$tmp/curl-error")"
    echo "   node$asker: \"$cap\" -> $(body | jq length) agents in ${ms} ms ($(mesh_headers))"
    # p2p.search_timeout (2 s) bounds the whole search; 1.5 s for curl,
    # HTTP and a loaded machine.
    [ "$ms" -le 3500 ] || fail "node$asker's mesh search took ${ms} ms with node2 down (p2p.search_timeout is 2 s, end to end)"
    body | jq -e --argjson want "${expected[$owner]}" \
        '[.[].id] as $got | all($want[]; . as $w | $got | index($w))' >/dev/null ||
        fail "node$asker's mesh search for $cap with node2 down lost node$owner's agents ${expected[$owner]}: $(body)"
done
phase "with node2 down, node1 and node3 still answer mesh searches with each other's agents"
