# Node.js 24 (the current LTS) on Debian 13: its glibc (2.41) loads the native uWebSockets.js build
# for Node.js 24 (@btc-vision/uwebsockets.js, which needs glibc 2.38; api/http/uws.ts logs the build it took).
FROM node:24-trixie-slim
# Build tools for the native modules whose install script compiles when no prebuilt binary fits (re2, lmdb, msgpackr-extract);
# util-linux for setpriv, which has the kernel kill an extraction process whose parent is gone (ingest/extract/pool.ts).
RUN apt-get update -qq && apt-get install -y -qq python3 make g++ util-linux && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# TypeScript (a development dependency) compiles the service; it is pruned after the build.
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build && npm prune --omit=dev
ENV DATA_DIR=/data
# Large allocations always mapped and unmapped by themselves (docs/architecture.md, "What a workspace costs").
ENV MALLOC_MMAP_THRESHOLD_=131072
EXPOSE 8080
# As package.json's start script (npm start builds first; the image is built above).
CMD ["node", "--max-semi-space-size=32", "--no-memory-reducer", "dist/service/main.js"]
