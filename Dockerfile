# syntax=docker/dockerfile:1
#
# One image for both processes of the billing service:
#   API:    docker run billing-service                          (node dist/src/server.js, port 3000)
#   worker: docker run billing-service node dist/src/worker.js  (Temporal worker)
#
# Debian (glibc), not Alpine: @temporalio/core-bridge ships its native library for glibc only.

# Node.js 24 LTS, as npm start and npm test run it (scripts/lib.sh's NODE_VERSION).
ARG NODE_IMAGE=node:24-bookworm-slim

# ---- build: all dependencies, compile TypeScript into dist/ ----------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
# Manifests first so the dependency layer is reused until the lock changes.
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm \
    npm ci --no-audit --no-fund
COPY . .
RUN npm run build

# ---- prod-deps: runtime dependencies only ------------------------------------------------------
# @temporalio/worker (and its webpack) is a runtime dependency: the worker bundles the compiled
# workflows from dist/workflows/index.js when it starts.
FROM ${NODE_IMAGE} AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm \
    npm ci --omit=dev --no-audit --no-fund

# ---- runtime ----------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
# HOST: the API's default (127.0.0.1) is unreachable from outside a container.
# MALLOC_*: glibc malloc gives freed memory back instead of keeping it in per-thread arenas (the
# worker's native memory, docs/performance.md "Worker memory").
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    MALLOC_ARENA_MAX=2 \
    MALLOC_TRIM_THRESHOLD_=131072 \
    MALLOC_MMAP_THRESHOLD_=131072
WORKDIR /app
# Files stay owned by root and read-only for the process; it runs as the image's unprivileged
# `node` user (uid 1000) and writes nothing to disk.
COPY package.json package-lock.json ./
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
USER node
EXPOSE 3000
# As PID 1 a process gets no default signal handling and reaps no zombies; run with
# `docker run --init` (docker-compose.yml sets `init: true`) so SIGTERM starts a graceful shutdown.
# --max-semi-space-size=16: Node.js 24's young generation grows to 192 MiB; 48 MiB, as on Node.js 20,
# keeps the API's memory where it was (docs/performance.md, "Node.js 24"). --max-old-space-size=256:
# under single-event load an unbounded heap grew past 450 MiB (docs/performance.md, "The API's heap bound").
CMD ["node", "--max-old-space-size=256", "--max-semi-space-size=16", "dist/src/server.js"]
