FROM node:20-bookworm-slim
RUN apt-get update -qq && apt-get install -y -qq python3 make g++ && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# TypeScript (a development dependency) compiles the service; it is pruned after the build.
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build && npm prune --omit=dev
ENV DATA_DIR=/data
EXPOSE 8080
# As package.json's start script (npm start builds first; the image is built above).
CMD ["node", "--max-semi-space-size=32", "--no-memory-reducer", "dist/service/main.js"]
