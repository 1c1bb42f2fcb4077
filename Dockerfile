# lockguard: the Slack app (`lockguard serve`) in a small image.
#   docker build -t lockguard .
#   docker run --env-file .env -p 127.0.0.1:3000:3000 lockguard
# Configuration is the environment only (docs/settings.md lists every setting, .env.example has them
# all); no .env is copied in.
FROM python:3.11.13-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LOCKGUARD_HTTP_HOST=0.0.0.0 \
    PORT=3000

WORKDIR /app

# The dependencies first, from the lock file alone (pinned, hash-checked; no fakeredis, no lupa):
# this layer is rebuilt only when requirements.lock changes, not on every change to bot/.
# Every dependency ships wheels for CPython 3.11 on Linux (x86_64 and arm64): no compiler needed.
COPY requirements.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements.lock

# Then lockguard itself, with no dependency resolution (all of them are installed above).
COPY pyproject.toml README.md ./
COPY bot ./bot
RUN pip install --no-cache-dir . --no-deps \
    && rm -rf /app/build /app/*.egg-info

# A system user with no home and no shell: the process owns nothing it could change. USER is
# numeric so that a runtime checking runAsNonRoot (Kubernetes) can tell it is not root.
RUN groupadd --system --gid 10001 lockguard \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin lockguard
USER 10001:10001

EXPOSE 3000

# GET /healthz: 200 while scans run on time and Redis answers, 503 (unhealthy) otherwise.
# Python's urllib (slim images have no curl), proxies ignored: the probe is local.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as u; u.build_opener(u.ProxyHandler({})).open('http://127.0.0.1:' + os.environ.get('PORT', '3000') + '/healthz', timeout=4)"]

CMD ["lockguard", "serve"]
