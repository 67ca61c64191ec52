# agentmesh, built from source (needs crates.io and Docker Hub):
#
#   docker build -t agentmesh:latest .                      # the node
#   docker build --target testbed -t agentmesh-testbed:latest .   # the demo's testbed
#   docker run --rm -p 127.0.0.1:7700:7700 -p 4001:4001 -v agentmesh-data:/data agentmesh:latest
#
# Without registry access, docker/build-offline.sh builds the same runtime
# image from a binary built on the host (docker/Dockerfile.offline); both
# run docker/runtime-setup.sh and copy the same files.

FROM rust:1-bookworm AS build
# aws-lc-sys (the TLS of libp2p's QUIC) builds with its cc builder on
# x86_64 and aarch64 Linux: gcc, make and perl, all in rust:1-bookworm
# (no cmake, clang or Go needed); ring needs only a C compiler.
WORKDIR /src
COPY . .
# The node without the `testbed` feature: a production node carries no
# test DNS server, certificate authority or generated population.
RUN cargo build --release --locked --no-default-features --bin agentmesh \
 && cp target/release/agentmesh /usr/local/bin/agentmesh \
 && strip --strip-debug /usr/local/bin/agentmesh

# The same binary with the testbed, for the compose demo's `testbed`
# service only (docker build --target testbed).
FROM build AS build-testbed
RUN cargo build --release --locked --bin agentmesh \
 && cp target/release/agentmesh /usr/local/bin/agentmesh \
 && strip --strip-debug /usr/local/bin/agentmesh

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
COPY docker/runtime-setup.sh /tmp/runtime-setup.sh
RUN sh /tmp/runtime-setup.sh && rm /tmp/runtime-setup.sh
COPY docker/agentmesh.toml /etc/agentmesh/agentmesh.toml
COPY docker/mesh-node.sh /usr/local/bin/mesh-node
ENV AGENTMESH_CONFIG=/etc/agentmesh/agentmesh.toml
USER agentmesh
WORKDIR /data
VOLUME /data
# The API, and libp2p over TCP and QUIC.
EXPOSE 7700 4001 4001/udp
ENTRYPOINT ["agentmesh"]
CMD ["node"]

# `docker build --target testbed -t agentmesh-testbed .`: the demo's testbed.
FROM runtime AS testbed
COPY --from=build-testbed /usr/local/bin/agentmesh /usr/local/bin/agentmesh

# The default target, last: the node.
FROM runtime AS node
COPY --from=build /usr/local/bin/agentmesh /usr/local/bin/agentmesh
