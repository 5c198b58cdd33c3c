import type { Middleware } from 'koa';
import type { Logger } from '../observability/logger';
import type { Dependency, OutageLog } from '../observability/outage-log';
import { ProblemError, toProblem } from '../domain/problem';
import { DatabaseUnavailableError } from '../domain/iam-repository';
import { problems } from '../domain/problem';
import { StoreUnavailableError } from '../domain/token-store';
import type { PageBranding } from '../http/page-layout';
import { prefersHtml, problemPageHeaders, problemPageHtml } from '../http/problem-page';
import { stateOf } from './iam-context';

/**
 * Every error of the /iam app becomes `application/problem+json` (docs/http-contract.md): problems as they are,
 * body-parser errors mapped to stable codes, store/database outages to 503, anything else a bare 500. A browser
 * (`Accept` prefers HTML) asking for a path no endpoint serves gets the 404 as a page (`branding`: `iam.ui.*`).
 */
export function problemMiddleware(logger: Logger, outages?: OutageLog, branding?: PageBranding): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        const problem = new ProblemError('IAM_NOT_FOUND', `No endpoint ${ctx.method} ${ctx.path}.`);
        if (!prefersHtml(ctx.get('accept'))) throw problem;
        const requestId = stateOf(ctx).prepared?.requestId ?? '';
        ctx.status = 404;
        ctx.set(problemPageHeaders(problem, requestId, branding));
        ctx.body = problemPageHtml(problem, ctx.method, ctx.path, requestId, branding === undefined ? {} : { branding });
      }
    } catch (error) {
      const problem = mapError(error);
      const dependency = unavailable(error);
      // An outage is logged as a state change with counts (outage-log.ts), not once per answer.
      if (dependency && outages) outages.failed(dependency, error);
      else if (problem.status >= 500) logger.error({ err: error, requestId: stateOf(ctx).prepared?.requestId, clientAddress: stateOf(ctx).prepared?.clientAddress }, 'iam: request failed');
      ctx.status = problem.status;
      ctx.set('Cache-Control', 'no-store');
      for (const [name, value] of Object.entries(problem.headers)) ctx.set(name, value);
      ctx.body = problem.toBody(stateOf(ctx).problemInstance ?? ctx.path, stateOf(ctx).prepared?.requestId ?? '');
      ctx.type = 'application/problem+json';
    }
  };
}

function unavailable(error: unknown): Dependency | null {
  if (error instanceof StoreUnavailableError) return 'tokenStore';
  if (error instanceof DatabaseUnavailableError) return 'database';
  return null;
}

function mapError(error: unknown): ProblemError {
  if (error instanceof ProblemError) return error;
  if (error instanceof StoreUnavailableError) return problems.storeUnavailable(error);
  if (error instanceof DatabaseUnavailableError) return problems.databaseUnavailable(error);
  const status = (error as { status?: unknown }).status;
  const type = (error as { type?: unknown }).type;
  if (status === 413 || type === 'entity.too.large') return new ProblemError('IAM_PAYLOAD_TOO_LARGE', 'The request body is too large.');
  if (status === 415) return new ProblemError('IAM_UNSUPPORTED_MEDIA_TYPE', 'The request body must be application/json.');
  if (status === 400 || type === 'entity.parse.failed') {
    return problems.validation([{ pointer: '/', message: 'is not valid JSON' }], 'The request body is not valid JSON.');
  }
  if (status === 405) return new ProblemError('IAM_METHOD_NOT_ALLOWED', 'Method not allowed on this endpoint.');
  return toProblem(error);
}
