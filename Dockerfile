FROM node:20-bookworm-slim
RUN apt-get update -qq && apt-get install -y -qq python3 make g++ && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY . .
ENV DATA_DIR=/data
EXPOSE 8080
CMD ["node", "--import", "tsx", "service/main.ts"]
