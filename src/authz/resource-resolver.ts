/**
 * Asks the host which scopes a resource belongs to (docs/policy-format.md): `GET` the resolver URL with the
 * resource id; 200 `{scopes?: [{type, id}]}` (none → the resource itself) or, for a resolver that reads the host's
 * own representation (`self`, `scopes` pointers), any JSON the mapping can read; 404 → not found, anything else
 * → unavailable. Answers never throw: the decision engine turns them into steps.
 */
import { Agent, request } from 'undici';
import type { GatewayMetrics } from '../observability/metrics';
import type { ResourceResolverConfig } from '../policy/compiled-policy';
import { scopesOfAnswer, type ScopeRef } from './answer-scopes';
import { decodeResourceId, resolverUrl } from './resource-url';

export type { ScopeRef } from './answer-scopes';

export type ResolveResult =
  | { kind: 'found'; scopeRefs: ScopeRef[] }
  | { kind: 'not-found' }
  | { kind: 'unavailable'; reason: string }
  /** Never asked: the caller's resolution budget was spent (resolution-budget.ts). */
  | { kind: 'refused'; reason: string };

/** A resolver answer is a small JSON document; anything larger is a misbehaving host, not a scope list. */
const MAX_BODY_BYTES = 256 * 1024;

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);

function isTimeout(error: unknown): boolean {
  const err = error as { name?: string; code?: string } | null;
  return err?.name === 'TimeoutError' || (err?.code !== undefined && TIMEOUT_CODES.has(err.code));
}

/** A short, safe description of a transport failure (no URLs: reasons reach diagnostics). */
function describeFailure(error: unknown, timeoutMs: number): string {
  if (isTimeout(error)) return `timed out after ${timeoutMs} ms`;
  const err = error as { code?: string; cause?: { code?: string } } | null;
  const code = err?.code ?? err?.cause?.code;
  return code ? `unreachable (${code})` : 'unreachable';
}

/** How a resolver call ended, as `iam_resolver_requests_total` labels it. */
type ResolverOutcome = 'ok' | 'not_found' | 'error' | 'timeout';

/** The metric children of one resource type, made on its first call (no label object built per call). */
interface TypeMetrics {
  requests: Record<ResolverOutcome, { inc(): void }>;
  duration: { observe(seconds: number): void };
}

export type ResolverMetrics = Pick<GatewayMetrics, 'resolverRequests' | 'resolverDuration'>;

/**
 * Releases a body we do not want: `dump()` drains a small remainder so the keep-alive socket can be reused
 * and destroys larger ones, with its own error listener (a bare `destroy()` emits an unhandled abort error).
 */
async function release(body: { dump(options?: { limit: number }): Promise<unknown> }): Promise<void> {
  await body.dump({ limit: 64 * 1024 }).catch(() => undefined);
}

/** Reads at most MAX_BODY_BYTES of a body as UTF-8; null when it is larger. */
async function readSmallBody(body: AsyncIterable<Buffer>): Promise<string | null> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of body) {
    total += chunk.length;
    if (total > MAX_BODY_BYTES) return null;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The HTTP client for every resolver of a policy; owns one keep-alive connection pool per origin. */
export class ResourceResolverClient {
  private readonly agent: Agent;
  private readonly metrics: ResolverMetrics | null;
  /** Resource types come from the policy: a bounded set of label values. */
  private readonly byType = new Map<string, TypeMetrics>();

  constructor(options: { connections?: number; metrics?: ResolverMetrics } = {}) {
    this.agent = new Agent({ connections: options.connections ?? 32, keepAliveTimeout: 10_000 });
    this.metrics = options.metrics ?? null;
  }

  /**
   * Resolves the scope refs of resource `type`/`id` (`id` as it appears in the normalized path). Counted in
   * `iam_resolver_requests_total` (an id that cannot name a resource as not_found, without a request or a
   * duration) and, for every request sent, timed in `iam_resolver_duration_seconds`.
   */
  async resolve(config: ResourceResolverConfig, type: string, id: string): Promise<ResolveResult> {
    const url = resolverUrl(config.url, id);
    // An id that cannot name a resource is one the host does not know: no request is made.
    if (url === null) {
      if (this.metrics) this.metricsOf(type).requests.not_found.inc();
      return { kind: 'not-found' };
    }
    if (!this.metrics) return (await this.ask(url, config, type, id))[0];
    const started = process.hrtime.bigint();
    const [result, outcome] = await this.ask(url, config, type, id);
    const children = this.metricsOf(type);
    children.duration.observe(Number(process.hrtime.bigint() - started) / 1e9);
    children.requests[outcome].inc();
    return result;
  }

  private metricsOf(type: string): TypeMetrics {
    let children = this.byType.get(type);
    if (children === undefined) {
      const { resolverRequests, resolverDuration } = this.metrics!;
      children = {
        requests: {
          ok: resolverRequests.labels(type, 'ok'),
          not_found: resolverRequests.labels(type, 'not_found'),
          error: resolverRequests.labels(type, 'error'),
          timeout: resolverRequests.labels(type, 'timeout'),
        },
        duration: resolverDuration.labels(type),
      };
      this.byType.set(type, children);
    }
    return children;
  }

  /** One resolver request; the answer and how it ended. */
  private async ask(url: string, config: ResourceResolverConfig, type: string, id: string): Promise<[ResolveResult, ResolverOutcome]> {
    const { timeoutMs, answer } = config;
    const decodedId = decodeResourceId(id);
    let response: Awaited<ReturnType<typeof request>>;
    try {
      response = await request(url, {
        method: 'GET',
        dispatcher: this.agent,
        headers: { accept: 'application/json' },
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        // headers/body timeouts bound silence; this bounds the whole exchange, connect included.
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      return [{ kind: 'unavailable', reason: `resolver for ${type} ${describeFailure(error, timeoutMs)}` }, isTimeout(error) ? 'timeout' : 'error'];
    }

    const { statusCode, body } = response;
    if (statusCode !== 200) {
      // Always consume the body: an unread one keeps the socket busy (undici README, "Garbage Collection").
      await release(body);
      if (statusCode === 404) return [{ kind: 'not-found' }, 'not_found'];
      return [{ kind: 'unavailable', reason: `resolver for ${type} answered HTTP ${statusCode}` }, 'error'];
    }

    let text: string | null;
    try {
      text = await readSmallBody(body);
    } catch (error) {
      await release(body);
      return [{ kind: 'unavailable', reason: `resolver for ${type} ${describeFailure(error, timeoutMs)}` }, isTimeout(error) ? 'timeout' : 'error'];
    }
    if (text === null) {
      await release(body);
      return [{ kind: 'unavailable', reason: `resolver for ${type} answered more than ${MAX_BODY_BYTES} bytes` }, 'error'];
    }
    const scopeRefs = scopesOfAnswer(text, answer, type, decodedId);
    if (typeof scopeRefs === 'string') return [{ kind: 'unavailable', reason: `resolver for ${type} answered ${scopeRefs}` }, 'error'];
    return [{ kind: 'found', scopeRefs }, 'ok'];
  }

  /** Closes the connection pool; pending resolutions finish first. */
  async close(): Promise<void> {
    await this.agent.close();
  }
}
