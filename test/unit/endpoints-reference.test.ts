/**
 * docs/endpoints.md lists every /iam route once, generated from the route declarations through the OpenAPI document
 * (src/api/endpoints-reference.ts): the table is what `npm run docs:endpoints` writes, byte for byte, so a declaration
 * changed without regenerating the docs fails here, and no row names a problem code its operation does not answer.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENDPOINTS_REFERENCE_BEGIN, ENDPOINTS_REFERENCE_END, problemCodesOf, renderEndpointsReference } from '../../src/api/endpoints-reference';
import { openApiDocument, type HttpMethod } from '../../src/api/openapi-document';

const docs = (name: string): string => readFileSync(join(__dirname, '..', '..', 'docs', name), 'utf8');

function generatedBlock(text: string): string {
  const begin = text.indexOf(`${ENDPOINTS_REFERENCE_BEGIN}\n`);
  const end = text.indexOf(ENDPOINTS_REFERENCE_END, begin);
  if (begin === -1 || end === -1) throw new Error('docs/endpoints.md has no generated endpoint table');
  return text.slice(begin + ENDPOINTS_REFERENCE_BEGIN.length + 1, end);
}

describe('the endpoint table of docs/endpoints.md', () => {
  it('is the one npm run docs:endpoints generates from the route declarations', () => {
    expect(generatedBlock(docs('endpoints.md'))).toBe(renderEndpointsReference());
  });

  it('has one row per operation of the served document, each naming only problem codes that operation answers', () => {
    const rows = generatedBlock(docs('endpoints.md')).split('\n').filter((line) => /^\| [A-Z]+ \| `/.test(line));
    const operations = Object.values(openApiDocument.paths).flatMap((item) => Object.keys(item).filter((key) => key !== 'parameters'));
    expect(rows).toHaveLength(operations.length);
    for (const row of rows) {
      const [, method, path] = /^\| ([A-Z]+) \| `([^`]+)`/.exec(row)!;
      const operation = openApiDocument.paths[path!]![method!.toLowerCase() as HttpMethod]!;
      const answered = new Set(Object.values(operation.responses).flatMap(problemCodesOf));
      const listed = [...row.matchAll(/`(IAM_[A-Z_]+)`/g)].map((match) => match[1]!);
      expect([`${method} ${path}`, listed.filter((code) => !answered.has(code))]).toEqual([`${method} ${path}`, []]);
    }
  });

  it('is the only endpoint table: docs/http-contract.md links to it instead of listing the routes again', () => {
    expect(docs('http-contract.md')).not.toMatch(/^\| (GET|POST|PUT|DELETE) \| `\/iam\//m);
    expect(docs('endpoints.md').replace(generatedBlock(docs('endpoints.md')), '')).not.toMatch(/^\| (GET|POST|PUT|DELETE) \| `\/iam\//m);
  });
});
