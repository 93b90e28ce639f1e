FROM node:20-bookworm-slim
RUN apt-get update -qq && apt-get install -y -qq python3 make g++ && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY . .
ENV DATA_DIR=/data
EXPOSE 8080
# As package.json's start script.
CMD ["node", "--max-semi-space-size=32", "--import", "tsx", "service/main.ts"]
