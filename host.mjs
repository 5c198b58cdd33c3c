// iam-gateway/host for ES modules: the CommonJS build re-exported by name (docs/host-integration.md).
import host from './dist/src/host/index.js';

export const { createHostAuthorization, HostAuthorizationError, koaMiddleware, expressMiddleware } = host;
