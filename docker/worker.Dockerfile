# psflow-worker with the CUDA backend (cuBLAS, cuDNN; --device=gpu): the image
# psflow/worker:VERSION-cuda. From the repository root:
#   docker build -f docker/worker.Dockerfile -t psflow/worker:0.1.0-cuda .
# The CPU-only worker is docker/worker-cpu.Dockerfile. docker/README.md explains the images;
# tests/docker/check_dockerfiles.py checks this file against scripts/setup.sh and the CMake
# targets; docker/runtime-packages.sh derives its runtime packages.
#
# NVIDIA publishes CUDA 13 + cuDNN 9 images for Ubuntu (not Debian), so both stages are Ubuntu
# 24.04: setup.sh installs the same package names from Ubuntu's archive (its versions and GCC 13,
# not Debian 12's), and the runtime packages are derived in the build stage from what the binary
# loads (Ubuntu 24.04 renamed many library packages, e.g. libgrpc++1.51t64).

# Build stage: nvcc 13.0, cuBLAS and cuDNN 9 from the devel image, the rest from scripts/setup.sh.
FROM nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04 AS build
WORKDIR /src
COPY scripts/setup.sh scripts/setup.sh
RUN scripts/setup.sh --no-kube-tools && rm -rf /var/lib/apt/lists/*
COPY . .
RUN scripts/build.sh -DPSFLOW_CUDA=ON \
 && strip --strip-debug build/bin/psflow-worker \
 && docker/runtime-packages.sh build/bin/psflow-worker > /tmp/runtime-packages.txt

# Runtime stage: CUDA runtime + cuDNN (the base), the packages of the other shared libraries the
# binary loads, Fashion-MNIST at the default --data_path. The base sets NVIDIA_VISIBLE_DEVICES and
# NVIDIA_DRIVER_CAPABILITIES=compute,utility: the NVIDIA container toolkit mounts the driver's
# libcuda and libnvidia-ml (GPU metrics) at run time.
FROM nvidia/cuda:13.0.2-cudnn-runtime-ubuntu24.04 AS runtime
ARG DEBIAN_FRONTEND=noninteractive
COPY --from=build /tmp/runtime-packages.txt /tmp/runtime-packages.txt
RUN apt-get update \
 && xargs -a /tmp/runtime-packages.txt apt-get install -y --no-install-recommends \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt
COPY --from=build /usr/share/datasets/fashion-mnist /usr/share/datasets/fashion-mnist
COPY --from=build /src/build/bin/psflow-worker /usr/local/bin/psflow-worker
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE_URL=
ARG LICENSES=NOASSERTION
LABEL org.opencontainers.image.title="psflow-worker" \
      org.opencontainers.image.description="psflow worker with the CUDA 13 + cuDNN 9 backend" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.licenses="${LICENSES}"
USER 65532:65532
# 9100: /metrics and /healthz when PSFLOW_METRICS_PORT (or --metrics_port) is set.
EXPOSE 9100
ENTRYPOINT ["/usr/local/bin/psflow-worker"]
