# mercer container image: a multi-stage build on Debian bookworm.
#   podman build --build-arg RUST_VERSION=1.95 -t mercer .
#   podman run -p 8080:8080 -v mercer-data:/var/lib/mercer/data mercer
ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-slim-bookworm AS builder
WORKDIR /src
# Dependencies first, in their own layer: source edits then rebuild only the crate.
COPY Cargo.toml Cargo.lock ./
COPY .cargo .cargo
COPY benches benches
RUN mkdir src && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
 && cargo build --release --locked \
 && rm -rf src
COPY src src
COPY config config
COPY openapi.yaml ./
# .cargo/config.toml sets -C target-cpu=x86-64-v3 (see README, Performance).
RUN touch src/main.rs src/lib.rs && cargo build --release --locked --bin mercer

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/mercer --create-home mercer \
 && mkdir -p /var/lib/mercer/data && chown mercer:mercer /var/lib/mercer/data
COPY --from=builder /src/target/release/mercer /usr/local/bin/mercer
USER mercer
WORKDIR /var/lib/mercer
ENV MERCER_BIND=0.0.0.0:8080 \
    MERCER_DATA_DIR=/var/lib/mercer/data
VOLUME ["/var/lib/mercer/data"]
EXPOSE 8080
# The slim image has no curl: the binary probes its own /healthz.
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 CMD ["mercer", "healthcheck"]
# mercer drains on SIGTERM (readyz 503, in-flight requests finish) and exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["mercer"]
