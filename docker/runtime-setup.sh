#!/bin/sh
# The runtime image's setup, run by both Dockerfile (from source) and
# docker/Dockerfile.offline (from a host-built binary), so the two images
# are the same apart from their base: an unprivileged user and the
# directories it writes.
set -eu
groupadd --gid 10001 agentmesh
useradd --uid 10001 --gid agentmesh --home-dir /data --no-create-home \
    --shell /usr/sbin/nologin agentmesh
# /data: the node's store and node.key (a volume); /shared: files the
# docker-compose testbed writes for the nodes (a volume shared with them).
mkdir -p /data /shared /etc/agentmesh
chown agentmesh:agentmesh /data /shared
chmod 0700 /data
