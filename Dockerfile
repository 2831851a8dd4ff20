# syntax=docker/dockerfile:1
# netqos-webhook server image: the server (`serve`) and the rebalancer CronJob (`rebalance`), and
# nothing else: no pip, no package manager, no compiler, no tests, and no writable bytecode cache.
# The bytecode it holds is compiled here, once, as unchecked-hash .pyc files: the root filesystem
# is read-only in the pod, so a process could never write a cache, and without bytecode every
# start would compile all it imports. Python loads an unchecked-hash .pyc without comparing it
# with its source (no timestamps, no hashing at import: "Cached bytecode invalidation",
# https://docs.python.org/3/reference/import.html#cached-bytecode-invalidation), which is right
# for files that never change, whatever timestamps the copy into the last stage leaves.
#
#   docker build -t netqos-webhook:0.1.0 .
#   minikube image load netqos-webhook:0.1.0      # or: kind load docker-image netqos-webhook:0.1.0
#
# The tag matches the package version (webhook/__init__.py) and the image in
# deploy/base/deployment.yaml; tests/process/test_deploy.py keeps the three in step.
# tests/e2e/test_image_contents.py lists what the image holds and runs both commands in it;
# docs/evidence/image-size-*.md (`scripts/image record`) says where its size goes.

# --- the product's wheel, and it with the dependencies it imports in a virtual environment ---
FROM python:3.12.8-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook/ webhook/
# Removed after the install, never imported by the product: the kubernetes client's asyncio
# variant (kubernetes.aio, about 40 MB of sources) and the aiohttp stack only it imports
# (webhook/cluster.py uses the synchronous client). The image's tests run every command that
# needs the client.
# Compiled: every module of the environment but the kubernetes client's generated API and model
# classes (about 900 modules, 23 MB of bytecode, which would take the image past half the size of
# the single-stage one): the client loads them one by one as a response needs them, and only
# `rebalance` does, never `serve`; docs/evidence/image-size-*.md has the bytecode's size. -f and
# PYTHONDONTWRITEBYTECODE: the compiling interpreter writes no timestamp .pyc of its own imports,
# which compileall would then keep as up to date.
RUN pip wheel --no-cache-dir --no-deps --disable-pip-version-check --wheel-dir /wheels . \
 && python3 -m venv --without-pip /opt/netqos \
 && pip --python /opt/netqos/bin/python install --no-cache-dir --no-compile --disable-pip-version-check /wheels/*.whl \
 && pip --python /opt/netqos/bin/python uninstall --yes --disable-pip-version-check \
        aiohttp aiohttp-retry aiohappyeyeballs aiosignal frozenlist multidict propcache yarl attrs \
 && rm -rf /opt/netqos/lib/python3*/site-packages/kubernetes/aio \
 && find /opt/netqos -depth -type d \( -name __pycache__ -o -name tests \) -exec rm -rf {} + \
 && rm -f /opt/netqos/bin/activate* \
 && PYTHONDONTWRITEBYTECODE=1 python3 -m compileall -q -f -j 0 --invalidation-mode unchecked-hash \
        -x '/kubernetes/client/(api|models)/' /opt/netqos

# --- the runtime's root filesystem: the base without what only installs software -------------
FROM python:3.12.8-slim-bookworm AS runtime
# Debian's packages that only install software (apt, debconf, pip) or need perl are purged through
# dpkg, so its database, which image scanners read, stays true (those a base lacks are skipped);
# then pip as python.org's build installs it (outside dpkg), the parts of the standard library for
# installing, editing and testing, bytecode caches, documentation and package caches; what remains
# of the standard library is compiled again, unchecked-hash, as the environment is above.
RUN groupadd --system --gid 65532 netqos \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin netqos \
 && purge="" \
 && for p in apt libapt-pkg6.0 gpgv debian-archive-keyring adduser debconf libdebconfclient0 \
             perl perl-base perl-modules-5.36 libperl5.36 e2fsprogs libext2fs2 libss2 logsave \
             python3-pip python3-setuptools python3-pkg-resources python3-wheel python3-distutils python3-lib2to3; do \
        if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then purge="$purge $p"; fi; \
    done \
 && dpkg --purge --force-depends --force-remove-essential $purge \
 && stdlib=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])') \
 && for site in $(python3 -c 'import site; print(*site.getsitepackages())'); do \
        rm -rf "$site"/pip "$site"/pip-* "$site"/setuptools* "$site"/pkg_resources "$site"/_distutils_hack \
               "$site"/distutils-precedence.pth "$site"/wheel "$site"/wheel-*; \
    done \
 && rm -rf /usr/local/bin/pip* /usr/bin/pip* \
           "$stdlib"/ensurepip "$stdlib"/idlelib "$stdlib"/lib2to3 "$stdlib"/pydoc_data "$stdlib"/test \
           "$stdlib"/tkinter "$stdlib"/turtledemo \
 && find /usr /opt -depth -type d -name __pycache__ -exec rm -rf {} + \
 && PYTHONDONTWRITEBYTECODE=1 python3 -m compileall -q -f -j 0 --invalidation-mode unchecked-hash "$stdlib" \
 && rm -rf /var/lib/apt /var/cache/* /var/log/* /usr/share/doc/* /usr/share/man/* /usr/share/info/* \
           /usr/share/lintian /usr/share/bash-completion /root/.cache
COPY --from=build /opt/netqos /opt/netqos

# --- the image: that filesystem as one layer, so nothing removed above is still in a lower one -
FROM scratch
COPY --from=runtime / /
# No .pyc writes (the root filesystem is read-only in the pod; what ships is compiled above),
# logs straight to stdout.
ENV PATH=/opt/netqos/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# A numeric user, so the kubelet can check runAsNonRoot without reading /etc/passwd.
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["netqos-webhook", "serve"]
CMD ["--bind=0.0.0.0:8443", "--certfile=/tls/tls.crt", "--keyfile=/tls/tls.key", "--config=/config/policy.yaml"]
