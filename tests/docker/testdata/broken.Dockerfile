# Breaks the rules of tests/docker/check_dockerfiles.py on purpose: check_dockerfiles_test.py
# expects each break below to be reported at its line with its rule, and nothing else, so the
# checker cannot pass vacuously. Not an image of psflow.

# from-pinned: no tag.
FROM debian AS build
# workdir: relative.
WORKDIR src
# add: a local file; copy-source: broken.dockerignore excludes scripts/*.sh.
ADD scripts/setup.sh scripts/setup.sh
# sudo; apt-recommends; apt-lists; setup-sh: not setup.sh's packages (a comment line inside a
# continued instruction, as below, is dropped by Docker's parser and by the checker's).
RUN sudo apt-get update && apt-get install -y cmake \
# the packages
      ninja-build wget
# cuda-flag: PSFLOW_CUDA left to AUTO.
RUN scripts/build.sh

# from-pinned: latest.
FROM busybox:latest AS unused

# stage-name: no AS; labels, expose: none in this final stage.
FROM debian:12.11-slim
# runtime-libs (the stand-in psflow-ps of the test loads libselinux1, not installed here);
# apt-get: `apt install`; apt-yes; runtime-dev; apt-recommends; apt-lists.
RUN apt install libgrpc++1.51 libgrpc++-dev
COPY --from=build /src/build/bin/psflow-ps /usr/local/bin/
# binary: no such CMake target.
COPY --from=build /src/build/bin/psflow-trainer /usr/local/bin/
# copy-from: no such stage.
COPY --from=builder /src/build/bin/psflow /usr/local/bin/
# user: root.
USER root
# exec-form: shell form; entrypoint: none at all.
CMD psflow-ps --bind_address=0.0.0.0
