# psflow-operator, the Kubernetes controller of TrainingJobs. From the repository root:
#   docker build -f docker/operator.Dockerfile -t psflow/operator:0.1.0 .
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

# Runtime stage: the binary and the Debian packages of the shared libraries it loads. In a pod it
# reaches the API server with the service account's token and CA (no system CA bundle needed).
FROM debian:12.11-slim AS runtime
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libabsl20220623 libbrotli1 libcpprest2.10 libprometheus-cpp-core1.0 libssl3 libyaml-cpp0.7 \
      zlib1g \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/bin/psflow-operator /usr/local/bin/psflow-operator
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE_URL=
ARG LICENSES=NOASSERTION
LABEL org.opencontainers.image.title="psflow-operator" \
      org.opencontainers.image.description="psflow operator: runs TrainingJobs as ps/worker pods" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.licenses="${LICENSES}"
USER 65532:65532
# 8080: /metrics, /healthz, /readyz (--metrics_port).
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/psflow-operator"]
