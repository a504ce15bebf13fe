# psflow-worker without CUDA (OpenBLAS): the image psflow/worker:VERSION that deploy/examples/
# names. From the repository root:
#   docker build -f docker/worker-cpu.Dockerfile -t psflow/worker:0.1.0 .
# The GPU worker is docker/worker.Dockerfile (psflow/worker:VERSION-cuda). docker/README.md
# explains the images; tests/docker/check_dockerfiles.py checks this file against scripts/setup.sh,
# the CMake targets and the libraries the built binaries load.

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

# Runtime stage: the binary, the Debian packages of the shared libraries it loads, and
# Fashion-MNIST at the worker's default --data_path (setup.sh installed dataset-fashion-mnist).
FROM debian:12.11-slim AS runtime
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libabsl20220623 libc-ares2 libgrpc++1.51 libgrpc29 libopenblas0-pthread \
      libprometheus-cpp-core1.0 libprotobuf32 libre2-9 libssl3 libyaml-cpp0.7 zlib1g \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/share/datasets/fashion-mnist /usr/share/datasets/fashion-mnist
COPY --from=build /src/build/bin/psflow-worker /usr/local/bin/psflow-worker
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE_URL=
ARG LICENSES=NOASSERTION
LABEL org.opencontainers.image.title="psflow-worker" \
      org.opencontainers.image.description="psflow worker, CPU only (OpenBLAS)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.licenses="${LICENSES}"
USER 65532:65532
# 9100: /metrics and /healthz when PSFLOW_METRICS_PORT (or --metrics_port) is set. A worker
# serves no gRPC; the manifests' port 2222 only names its address in TF_CONFIG.
EXPOSE 9100
ENTRYPOINT ["/usr/local/bin/psflow-worker"]
