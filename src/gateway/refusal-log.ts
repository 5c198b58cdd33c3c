import type { IncomingHttpHeaders } from 'node:http';
import type { ProblemError } from '../domain/problem';
import type { RefusedRequest } from '../http/prepare-request';
import type { AccessLog } from '../observability/access-log';
import type { GatewayMetrics } from '../observability/metrics';
import type { RequestTracer } from '../observability/tracing';

/**
 * Requests the front door refuses before any route is looked at (an encoded `/`, a control character, a
 * method override, a token in the query, two `Authorization` headers, a CONNECT, an `Expect` it does not meet):
 * security logging includes refusals, so each is counted, gets its server span (`METHOD refused`, with the
 * problem's code) and an access-log line in every mode but `off`, like the proxy's own denials.
 */
export class RefusalLog {
  constructor(
    private readonly deps: {
      metrics: Pick<GatewayMetrics, 'requests'>;
      tracer: RequestTracer | null;
      accessLog: AccessLog | null;
    },
  ) {}

  /** Records one refusal; `answer` writes the problem to the client (on the response or the raw socket). */
  refuse(refused: RefusedRequest, headers: IncomingHttpHeaders, problem: ProblemError, answer: () => void): void {
    const started = performance.now();
    this.deps.metrics.requests.inc({ outcome: 'refused' });
    const { tracer, accessLog } = this.deps;
    const span =
      tracer === null
        ? null
        : tracer.startSampled({ method: refused.method, route: 'refused', path: refused.path, headers, clientAddress: refused.clientAddress, trustedPeer: refused.trustedPeer });
    answer();
    if (span !== null) {
      span.span.setAttribute('iam.problem', problem.code);
      span.end(problem.status);
    }
    accessLog?.write({
      requestId: refused.requestId,
      traceId: span?.recordedTraceId ?? null,
      clientAddress: refused.clientAddress,
      method: refused.method,
      path: refused.path,
      route: null,
      status: problem.status,
      decision: 'none',
      step: null,
      userId: null,
      profileId: null,
      clientType: null,
      decisionId: null,
      durationMs: Math.round((performance.now() - started) * 1000) / 1000,
      upstreamMs: null,
      bytes: null,
    });
  }
}
