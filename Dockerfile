# The Fargate worker: `duetime worker --runtime fargate` over the fargate queues.
# Built by `cdk deploy` (ContainerImage.from_asset, linux/arm64); synth needs no Docker.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# Only what the package build needs (.dockerignore keeps the rest out of the context).
COPY pyproject.toml README.md ./
COPY shared ./shared
# The package and its runtime dependencies, no dev or infra extras.
RUN pip install . \
    && useradd --system --uid 10001 --no-create-home duetime

USER 10001
# ECS sends SIGTERM on scale-in and deployments: the worker finishes in-flight runs,
# releases the rest and exits 0 (see infra/constructs/workers.py for the timeouts).
ENTRYPOINT ["duetime", "worker", "--runtime", "fargate"]
