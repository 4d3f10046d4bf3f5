# syntax=docker/dockerfile:1
# The gateway's container image.
#
#   docker build -t gateway .
#   docker run --read-only --tmpfs /tmp -v gateway-data:/data -p 8787:8787 gateway
#
# Stage 1 compiles the Cython speedups into a wheel (and collects every dependency as a wheel); stage 2 is
# python:3.11-slim without a compiler, installing those wheels offline. The image runs as a non-root user, writes
# only to /data (a volume) and /tmp (mount a tmpfs there when the root filesystem is read-only), and serves
# `gateway serve` on 0.0.0.0:8787 with one worker per CPU the container may use (docker/entrypoint.sh).

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# gcc + libc headers for the extensions; Cython, setuptools and wheel come from pyproject.toml's build-system
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# the gateway wheel (with gateway/_speedups/*.so and the provider mock, gateway_mock/) plus the wheels of its
# dependencies (redis with hiredis included), at the versions the test suite last passed with (constraints.txt, which
# also pins the build backend and Cython)
RUN PIP_CONSTRAINT=/src/constraints.txt pip wheel --no-cache-dir --wheel-dir /wheels "." \
    && python -c "import glob, sys, zipfile; \
        wheel = glob.glob('/wheels/gateway-*.whl')[0]; names = zipfile.ZipFile(wheel).namelist(); \
        built = any(n.startswith('gateway/_speedups/') and n.endswith('.so') for n in names); \
        mock = 'gateway_mock/app.py' in names; \
        sys.exit(0 if built and mock else 'the wheel lacks compiled speedups or the mock: ' + wheel)"

FROM ${PYTHON_IMAGE}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Offline install of the wheels built above (bind-mounted, so they are not kept in a layer); no compiler here.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index /wheels/*.whl \
    && useradd --system -l --uid 10001 --user-group --home-dir /nonexistent --no-create-home \
        --shell /usr/sbin/nologin gateway \
    && mkdir -p /data /app \
    && chown 10001:10001 /data
COPY --chmod=0755 docker/entrypoint.sh /usr/local/bin/gateway-entrypoint

# --- Settings baked into the image -------------------------------------------------------------------------------
# Serve on every interface of the container; keep state in the /data volume; never write .pyc files (the root
# filesystem may be read-only). Multi-process Prometheus metrics need a writable, per-boot directory: /tmp is a
# tmpfs in compose.yaml (`--tmpfs /tmp` with `docker run --read-only`); the entrypoint creates and empties it.
ENV GATEWAY_HOST=0.0.0.0 \
    GATEWAY_PORT=8787 \
    GATEWAY_DATA_DIR=/data \
    PROMETHEUS_MULTIPROC_DIR=/tmp/gateway-metrics \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# --- Tuning knobs (set with -e / compose `environment:`; the defaults below are the gateway's own) --------------
# GATEWAY_WORKERS                        worker processes. Unset: one per CPU the container may use (affinity and
#                                        cgroup CPU quota, computed at start by the entrypoint).
# GATEWAY_BACKLOG=4096                   listen backlog (pending connections) of the server socket.
# GATEWAY_BACKPRESSURE=16384             requests and streams one worker serves at once; each needs two open files:
#                                        the start raises the soft limit, or lowers this to fit and says so (run
#                                        with --ulimit nofile=33280 or more when the host's limit is lower).
# GATEWAY_POOL_SIZE=0                    upstream connections per worker in total (0 = unlimited).
# GATEWAY_POOL_SIZE_PER_HOST=0           upstream connections per worker per upstream host (0 = unlimited).
# GATEWAY_POOL_KEEPALIVE_S=60            seconds an idle upstream keep-alive connection stays in the pool.
# GATEWAY_UPSTREAM_CONNECT_TIMEOUT_MS=10000   connecting to an upstream (504 when it runs out).
# GATEWAY_UPSTREAM_READ_TIMEOUT_MS=600000     longest wait for the next bytes from an upstream (504).
# GATEWAY_REQUEST_TIMEOUT_MS             default request_timeout of every request (unset: none; 408 when it runs out).
# GATEWAY_SHUTDOWN_GRACE_S=30            seconds in-flight requests get to finish on SIGTERM (keep the
#                                        orchestrator's stop timeout above it: compose.yaml stop_grace_period).
# GATEWAY_MAX_BODY_BYTES=33554432        largest request body accepted (413 above).
# GATEWAY_REDIS_URL                      shared state store (rate limits, breakers, cache) across workers/replicas.
# GATEWAY_STATE_FAIL_MODE=open           limits while the state store is unreachable: open admits, closed refuses.
# GATEWAY_POLICY_OUTPUT_TOKENS=1024      output tokens token/cost limits reserve for a request without max_tokens.
# GATEWAY_POLICY_RESERVATION_TTL_MS=900000   an unsettled token/cost reservation is released after this.
# GATEWAY_ADMIN_KEY                      admin key; unset on first start: one is generated, stored in /data and
#                                        printed once in the log.
# GATEWAY_ALLOW_PRIVATE_HOSTS            comma-separated private hosts upstream calls may reach (SSRF allow list).
# GATEWAY_LOG_LEVEL=info                 server log level.
# GATEWAY_LOG_FILE                       JSON request-log lines: unset or "-" = stdout, a path = appended, "off".
# GATEWAY_LOG_RETENTION_ROWS=100000      request logs kept in /data/logs.db (newest rows).
# GATEWAY_FILE_MAX_BYTES=209715200       largest file upload (413 above); uploads are spooled under /data/tmp.
# GATEWAY_FILES_DIR                      gateway-stored files (unset: /data/files, or Redis with GATEWAY_REDIS_URL).
# GATEWAY_BATCH_CONCURRENCY=16           lines of one gateway-run batch in flight at once.
# GATEWAY_BATCH_LEASE_MS=15000           a dead instance's batches are taken over after this long.
# HTTP_PROXY / HTTPS_PROXY               outbound proxy for http:// / https:// upstreams (standard names; the
#                                        lower-case spellings work too).
# NO_PROXY                               hosts, domains, addresses or CIDRs called directly ("*" for all).

USER 10001:10001
WORKDIR /app
VOLUME ["/data"]
EXPOSE 8787
HEALTHCHECK --interval=15s --timeout=3s --start-period=15s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + \
os.environ.get('GATEWAY_PORT', '8787') + '/health', timeout=2)"]
ENTRYPOINT ["/usr/local/bin/gateway-entrypoint"]
CMD ["serve"]
