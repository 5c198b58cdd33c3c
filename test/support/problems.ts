/**
 * Problem responses (`application/problem+json`) asserted the same way in every test file.
 */

/** An answer as the test helpers hand it over: fetch-like `Headers` or a plain header record, the body as text. */
export interface ProblemAnswer {
  status: number | null;
  headers: Headers | Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * The answer is a problem with this status and code: status line, problem+json content type, and a body
 * matching `{ status, code, ...fields }` (e.g. `{ requestId: expect.any(String) }`).
 */
export function expectProblem(answer: ProblemAnswer, status: number, code: string, fields: Record<string, unknown> = {}): void {
  expect(answer.status).toBe(status);
  const contentType = answer.headers instanceof Headers ? answer.headers.get('content-type') : answer.headers['content-type'];
  expect(contentType).toMatch(/^application\/problem\+json/);
  expect(JSON.parse(answer.body)).toMatchObject({ status, code, ...fields });
}
