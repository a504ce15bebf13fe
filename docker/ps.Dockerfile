# psflow-ps, the parameter server. From the repository root:
#   docker build -f docker/ps.Dockerfile -t psflow/ps:0.1.0 .
# docker/README.md explains the images; tests/docker/check_dockerfiles.py checks this file against
# scripts/setup.sh, the CMake targets and the libraries the built binaries load.

# Build stage: Debian 12 with exactly the packages of a developer's machine (scripts/setup.sh;
# helm and kubectl are not needed here), built by scripts/build.sh. Identical in operator, ps
# and worker-cpu, so BuildKit compiles once.
FROM debian:12.11-slim AS build
WORKDIR /src
COPY scripts/setup.sh scripts/setup.sh
RUN scripts/setup.sh --no-kube-tools && rm -rf /var/lib/apt/lists/*
COPY . .
RUN scripts/build.sh -DPSFLOW_CUDA=OFF \
 && strip --strip-debug build/bin/psflow build/bin/psflow-ps build/bin/psflow-worker \
      build/bin/psflow-operator

# Runtime stage: the binary and the Debian packages of the shared libraries it loads.
FROM debian:12.11-slim AS runtime
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libabsl20220623 libc-ares2 libgrpc++1.51 libgrpc29 libprometheus-cpp-core1.0 libprotobuf32 \
      libre2-9 libssl3 zlib1g \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/bin/psflow-ps /usr/local/bin/psflow-ps
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE_URL=
ARG LICENSES=NOASSERTION
LABEL org.opencontainers.image.title="psflow-ps" \
      org.opencontainers.image.description="psflow parameter server: a TrainingJob's variables" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.licenses="${LICENSES}"
USER 65532:65532
# 2222: the ParameterServer gRPC service (the port of this task in TF_CONFIG);
# 2223: its bulk channel for tensor bytes (the gRPC port + 1, or PSFLOW_BULK_PORT);
# 9100: /metrics and /healthz when PSFLOW_METRICS_PORT (or --metrics_port) is set.
EXPOSE 2222 2223 9100
ENTRYPOINT ["/usr/local/bin/psflow-ps"]
