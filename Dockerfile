# syntax=docker/dockerfile:1
# The aigw image, for builders with an engine (BuildKit, Buildah, Kaniko):
#   docker build -t aigw:0.1.0 .
# `make image` builds the equivalent image without one (hack/image.sh, umoci).
#
# Build stage: the same Debian release as the runtime image, so the binary links the glibc it
# runs with.
FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin aigw \
 && install -m 0755 target/release/aigw /aigw

# Runtime: glibc and libgcc only, no shell, no package manager; uid 65532 ("nonroot").
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /aigw /aigw
# The chart starts the container with `command: ["aigw", "operator", ...]`: PATH=/ resolves it.
ENV PATH=/
USER 65532:65532
ENTRYPOINT ["/aigw"]
