import { PROBLEM_CATALOG, ProblemError, problems, toProblem } from '../../src/domain/problem';

describe('problem catalog', () => {
  it('builds an RFC 9457 body with code, status and request id', () => {
    const body = new ProblemError('IAM_RATE_LIMITED', 'slow down').toBody('/iam/auth/login', 'req-1');
    expect(body).toEqual({
      type: 'https://iam-gateway.dev/problems/iam-rate-limited',
      title: 'Too many requests',
      status: 429,
      detail: 'slow down',
      instance: '/iam/auth/login',
      code: 'IAM_RATE_LIMITED',
      requestId: 'req-1',
    });
  });

  it('hides the cause of unknown errors behind a 500 without internals', () => {
    const problem = toProblem(new Error('connect ECONNREFUSED 10.0.0.1:5432 at Socket.x (/src/secret.ts:12)'));
    const body = problem.toBody('/x', 'r');
    expect(body.status).toBe(500);
    expect(JSON.stringify(body)).not.toMatch(/ECONNREFUSED|secret\.ts/);
  });

  it('answers 401 with a Bearer challenge, invalid_token when a token was sent', () => {
    expect(problems.unauthenticated('no token', false).headers['WWW-Authenticate']).toBe('Bearer realm="iam-gateway"');
    expect(problems.unauthenticated('revoked', true).headers['WWW-Authenticate']).toContain('error="invalid_token"');
  });

  it('maps every code to a 4xx or 5xx status', () => {
    for (const [code, entry] of Object.entries(PROBLEM_CATALOG)) {
      expect(code).toMatch(/^IAM_[A-Z_]+$/);
      expect(entry.status).toBeGreaterThanOrEqual(400);
      expect(entry.status).toBeLessThan(600);
    }
  });
});
