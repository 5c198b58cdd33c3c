/**
 * The check every /iam request body goes through (src/api/validate-body.ts): `assertStorable` first reads the body
 * without building pointers and walks it again only when something is wrong. Held to the walk that names the
 * pointers: on generated bodies (control characters, lone surrogates, bad keys, nesting around the depth bound) it
 * refuses exactly the bodies in which `unstorableStrings` finds something, with the same errors.
 */
import { assertStorable, MAX_BODY_DEPTH, unstorableStrings } from '../../src/api/validate-body';
import { isProblemError } from '../../src/domain/problem';
import { seededRandom } from '../support/random';

const STRINGS = ['', 'project:read', 'PROJECT', '42', 'é', '😀', 'a\u0000b', 'tab\there', 'del\u007f', '\ud800', 'x\udc00', '\ud83d\ude00ok', 'a~b/c'];

function generate(next: () => number, depth: number, maxDepth: number): unknown {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const roll = next();
  if (depth >= maxDepth || roll < 0.3) {
    // Mostly storable text, as real bodies are.
    return next() < 0.9 ? pick([...STRINGS.slice(0, 6), 1, true, null]) : pick(STRINGS);
  }
  const size = 1 + Math.floor(next() * 3);
  if (roll < 0.6) return Array.from({ length: size }, () => generate(next, depth + 1, maxDepth));
  const out: Record<string, unknown> = {};
  for (let i = 0; i < size; i++) out[next() < 0.95 ? pick(['checks', 'resource', 'id', 'type', 'a/b']) : pick(STRINGS)] = generate(next, depth + 1, maxDepth);
  return out;
}

/** `levels` arrays around `leaf`. */
function nested(levels: number, leaf: unknown): unknown {
  let value = leaf;
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

function outcome(body: unknown): unknown {
  try {
    assertStorable(body);
    return 'accepted';
  } catch (error) {
    if (!isProblemError(error)) return `thrown ${(error as Error).name}`;
    return error.toBody('/iam/x', 'r-1');
  }
}

function expected(body: unknown): string {
  try {
    const { pointers, tooDeep } = unstorableStrings(body);
    return pointers.length === 0 && tooDeep === null ? 'accepted' : 'refused';
  } catch (error) {
    return `thrown ${(error as Error).name}`;
  }
}

describe('assertStorable', () => {
  it('refuses exactly the generated bodies in which unstorableStrings finds something', () => {
    const next = seededRandom(20261128);
    const seen = { accepted: 0, refused: 0 };
    for (let i = 0; i < 3000; i++) {
      const body = generate(next, 0, 1 + Math.floor(next() * 8));
      const got = outcome(body);
      const want = expected(body);
      const same = want === 'refused' ? typeof got === 'object' : got === want;
      if (!same) expect({ i, body, got }).toEqual({ i, body, got: want });
      if (want === 'accepted' || want === 'refused') seen[want]++;
    }
    expect(seen.accepted).toBeGreaterThan(300);
    expect(seen.refused).toBeGreaterThan(300);
  });

  it('refuses a body nested to the bound and names the pointer, accepts one level less', () => {
    expect(outcome(nested(MAX_BODY_DEPTH - 1, {}))).toBe('accepted');
    expect(outcome(nested(MAX_BODY_DEPTH - 1, 'a\u0000'))).not.toBe('accepted');
    const tooDeep = outcome(nested(MAX_BODY_DEPTH, {})) as { errors: Array<{ pointer: string }> };
    expect(tooDeep.errors).toEqual([expect.objectContaining({ pointer: '/0'.repeat(MAX_BODY_DEPTH) })]);
  });

  it('names every refused string and key of a body with several', () => {
    const refused = outcome({ checks: [{ permissionCode: 'p\u0001' }, { ok: 'fine' }], ['k\u0000']: 'v', s: '\ud800' }) as { errors: Array<{ pointer: string }> };
    expect(refused.errors.map((error) => error.pointer).sort()).toEqual(['/checks/0/permissionCode', '/k%00', '/s']);
  });
});
