/**
 * RED metrics per route pattern and the decision latency (docs/observability.md): each series moves with the request
 * it names, labelled by the matched route's pattern (never the raw path), the method and the status class.
 */
import { bearer, login } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { metricDelta } from '../support/scrape';

let fixture: GatewayWithUpstream;

beforeAll(async () => {
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: E2E_POLICIES });
});
afterAll(() => fixture?.close());

const delta = (name: string, labels: Record<string, string>, event: () => Promise<unknown>): Promise<number> => metricDelta(fixture.gateway.managementUrl, name, labels, event);

const get = async (path: string, token?: string): Promise<number> => {
  const answer = await fetch(`${fixture.gateway.url}${path}`, { headers: token ? bearer(token) : {} });
  await answer.arrayBuffer();
  return answer.status;
};

describe('iam_http_requests_total and iam_http_request_duration_seconds', () => {
  it('count and time each answered request by route pattern, method and status class', async () => {
    const alice = (await login(fixture.gateway.url, 'alice')).accessToken;
    const projects = { route: '/api/projects/:projectId', method: 'GET' };
    // Two different paths, one pattern: one series (the raw path is never a label).
    expect(await delta('iam_http_requests_total', { ...projects, status_class: '2xx' }, async () => [await get('/api/projects/1', alice), await get('/api/projects/7', alice)])).toBe(2);
    expect(await delta('iam_http_request_duration_seconds_count', { route: '/api/projects/:projectId' }, () => get('/api/projects/1', alice))).toBe(1);
    expect(await delta('iam_http_requests_total', { route: '/api/admin/**', method: 'GET', status_class: '4xx' }, () => get('/api/admin/stats', alice))).toBe(1);
    expect(await delta('iam_http_requests_total', { route: '/api/projects', method: 'GET', status_class: '4xx' }, () => get('/api/projects'))).toBe(1);
    // No route matched: `none`.
    expect(await delta('iam_http_requests_total', { route: 'none', method: 'GET', status_class: '4xx' }, () => get('/nowhere', alice))).toBe(1);
    const text = await (await fetch(`${fixture.gateway.managementUrl}/metrics`)).text();
    expect(text).not.toMatch(/route="\/api\/projects\/1"/);
  });
});

describe('iam_decision_duration_seconds', () => {
  it('times each decision, by result', async () => {
    const alice = (await login(fixture.gateway.url, 'alice')).accessToken;
    expect(await delta('iam_decision_duration_seconds_count', { result: 'allow' }, () => get('/api/projects', alice))).toBe(1);
    expect(await delta('iam_decision_duration_seconds_count', { result: 'deny' }, () => get('/api/admin/stats', alice))).toBe(1);
  });
});
