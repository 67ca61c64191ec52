#!/bin/sh
# Entrypoint of the docker-compose mesh's nodes (installed in the image as
# /usr/local/bin/mesh-node):
#
#   mesh-node SELF PEER...      e.g. mesh-node node1 node2 node3
#
# 1. waits for the testbed's /shared/ready (its CA and domain lists);
# 2. makes this node's key if needed and publishes its peer id in
#    /shared/peers/SELF;
# 3. waits for each PEER's id there, then runs `agentmesh node` with
#    p2p.bootstrap = /dns4/PEER/tcp/4001/p2p/<id> and p2p.trusted_peers =
#    those ids: nodes run by one operator take each other's DNS evidence
#    as is, so none of them re-crawls what another one verified.
#
# 4. the API listens on 0.0.0.0, so the node needs a credential: on
#    first start an admin API key is made (`agentmesh keys create`), its
#    token kept in /data/operator.token (mode 0600) for the operator.
#
# Everything else comes from the config file and AGENTMESH_* variables.
# Every wait has a deadline (AGENTMESH_WAIT_SECONDS, default 120).
set -eu

if [ $# -lt 1 ]; then
    echo "usage: mesh-node SELF [PEER...]" >&2
    exit 2
fi
self=$1
shift
shared=${AGENTMESH_SHARED:-/shared}
wait_seconds=${AGENTMESH_WAIT_SECONDS:-120}
port=${AGENTMESH_P2P_PORT:-4001}

log() { echo "mesh-node[$self]: $*" >&2; }

# wait_for FILE WHAT: polls until FILE is non-empty, at most wait_seconds.
wait_for() {
    deadline=$(($(date +%s) + wait_seconds))
    while [ ! -s "$1" ]; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            log "gave up after ${wait_seconds}s waiting for $2 ($1)"
            exit 1
        fi
        sleep 0.2
    done
}

wait_for "$shared/ready" "the testbed"
id=$(agentmesh peer-id)
mkdir -p "$shared/peers"
printf '%s\n' "$id" >"$shared/peers/.$self.tmp"
mv "$shared/peers/.$self.tmp" "$shared/peers/$self"
log "peer id $id"

bootstrap=""
trusted=""
for peer in "$@"; do
    wait_for "$shared/peers/$peer" "the peer id of $peer"
    peer_id=$(cat "$shared/peers/$peer")
    bootstrap="$bootstrap${bootstrap:+, }\"/dns4/$peer/tcp/$port/p2p/$peer_id\""
    trusted="$trusted${trusted:+, }\"$peer_id\""
done
AGENTMESH_P2P__BOOTSTRAP="[$bootstrap]"
AGENTMESH_P2P__TRUSTED_PEERS="[$trusted]"
export AGENTMESH_P2P__BOOTSTRAP AGENTMESH_P2P__TRUSTED_PEERS
log "bootstrap $AGENTMESH_P2P__BOOTSTRAP"
if [ ! -s /data/api-keys.json ]; then
    umask 077
    agentmesh keys create --name operator --scope admin >/data/operator.token
    log "made an admin API key; its token is in /data/operator.token"
fi
exec agentmesh node
