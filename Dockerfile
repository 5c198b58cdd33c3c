# iam-gateway: a Node 24 (Debian bookworm, slim) image running `iam-gateway serve`.
# Build: docker build -t iam-gateway .
# Run:   docker run -p 8080:8080 -p 127.0.0.1:9090:9090 -e SERVER_MANAGEMENT_HOST=0.0.0.0 -e UPSTREAM_URL=http://host:3000 \
#          -e DATABASE_URL=postgresql://... -e REDIS_URL=redis://... \
#          -v $PWD/policies:/app/policies:ro iam-gateway
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY migrations ./migrations
COPY examples ./examples
RUN npm ci --no-audit --no-fund && npm prune --omit=dev

FROM node:24-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json LICENSE ./
COPY bin ./bin
# The web console (/iam/console): static files served by the gateway.
COPY console ./console
# Only the defaults: the example users and provisioning files have known passwords and stay out of the image.
COPY config/default.yaml ./config/default.yaml
COPY policies ./policies
# Writable data directory (embedded database, audit spool: iam.audit.spool-dir); mount a volume on it so
# audit events spooled at a stop survive the container: -v iam-data:/app/.data
RUN mkdir -p /app/.data && chown node:node /app/.data
USER node
EXPOSE 8080 9090
# The management port as the gateway reads it: SERVER_MANAGEMENT_PORT, else MANAGEMENT_PORT, else 9090.
HEALTHCHECK --interval=10s --timeout=3s CMD node -e "fetch('http://127.0.0.1:'+(process.env.SERVER_MANAGEMENT_PORT||process.env.MANAGEMENT_PORT||9090)+'/health/live').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# node runs as PID 1, nothing in between: SIGTERM reaches the gateway, which drains and stops (npm start would
# swallow it).
ENTRYPOINT ["node", "bin/iam-gateway.js"]
CMD ["serve"]
