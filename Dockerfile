# workerless as its own container: run it beside the app container (a sidecar; deploy/ has ECS,
# Kubernetes and systemd examples). Build: docker build -t workerless .
# Configure it with WORKERLESS_<KEY> variables, or mount a TOML file and set WORKERLESS_CONFIG to its path.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Only what `pip install .` reads; .dockerignore keeps the rest of the checkout out of the context.
WORKDIR /src
COPY pyproject.toml README.md ./
COPY workerless_gevent ./workerless_gevent
RUN pip install .

# A numeric non-root user, so that Kubernetes' runAsNonRoot can check it.
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin workerless
USER 10001
WORKDIR /

# The status server (/healthz, /readyz, /metrics) when [status] listen = "0.0.0.0:9100".
EXPOSE 9100

# Exec form, no shell in between: the orchestrator's SIGTERM reaches the daemon (PID 1), which stops
# receiving, finishes or releases what it holds within shutdown_timeout and exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["workerless"]
