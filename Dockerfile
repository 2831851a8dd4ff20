# syntax=docker/dockerfile:1
# netqos-webhook server image.
#
#   docker build -t netqos-webhook:0.1.0 .
#   minikube image load netqos-webhook:0.1.0      # or: kind load docker-image netqos-webhook:0.1.0
#
# The tag matches the package version (webhook/__init__.py) and the image in
# deploy/base/deployment.yaml; tests/process/test_deploy.py keeps the three in step.

# --- build a wheel, so the runtime image carries no build tools or sources --------------------
FROM python:3.12.8-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook/ webhook/
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# --- runtime -----------------------------------------------------------------------------------
FROM python:3.12.8-slim-bookworm
# No .pyc writes (the root filesystem is read-only in the pod), logs straight to stdout.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir /wheels/*.whl \
 && groupadd --system --gid 65532 netqos \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin netqos
# A numeric user, so the kubelet can check runAsNonRoot without reading /etc/passwd.
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["netqos-webhook", "serve"]
CMD ["--bind=0.0.0.0:8443", "--certfile=/tls/tls.crt", "--keyfile=/tls/tls.key", "--config=/config/policy.yaml"]
