# syntax=docker/dockerfile:1
# Gatehouse: build with the full toolchain, run on a slim image as a non-root user.

# --- build: dependencies (better-sqlite3 compiles; @node-rs/argon2 comes prebuilt) and the TypeScript build
FROM node:22-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY migrations ./migrations
RUN npm run build \
 && npm prune --omit=dev

# --- runtime -----------------------------------------------------------------------------------------
FROM node:22-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/data \
    DATABASE_URL=sqlite:/data/gatehouse.db
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# Read at run time relative to the project root (next to package.json), not from dist/.
COPY package.json openapi.yaml ./
COPY views ./views
COPY bin ./bin
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s \
  CMD node -e "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"
CMD ["node", "--max-semi-space-size=4", "--heap-growing-percent=20", "--require", "./bin/thread-pool-size.cjs", "dist/src/server.js"]
