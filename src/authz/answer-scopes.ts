/**
 * How a resolver's 200 answer becomes a resource's scope refs (docs/policy-format.md, "Resolvers"): the `{scopes}`
 * document, or the host's own representation read as the policy says (`self`, `scopes` JSON Pointers). Pure
 * functions (no HTTP client), shared by the resolver client and `policy test`'s stub resolvers.
 */
import { jsonIdOf, resolveJsonPointer } from '../domain/json-pointer';
import type { ResolverAnswerMapping } from '../policy/compiled-policy';

export type ScopeRef = { type: string; id: string };

/** Parses a 200 body as the `{scopes}` document; null when it is not `{scopes?: [{type: string, id: string|number}]}`. */
function parseScopes(text: string, type: string, id: string): ScopeRef[] | null {
  let body: unknown;
  try {
    body = text.length === 0 ? {} : JSON.parse(text);
  } catch {
    return null;
  }
  return scopesOfDocument(body, type, id);
}

/**
 * The scope refs of a 200 answer (`text`) for resource `type`/`id` (`id` decoded), read as `answer` says: the resolver
 * document `{scopes}` when undefined, else the host's own representation (`self`, or JSON Pointers). A string when
 * the answer cannot be read that way: why, without any value of the answer (reasons reach diagnostics). Every such
 * answer fails closed (502), as a resolver that is down does.
 */
export function scopesOfAnswer(text: string, answer: ResolverAnswerMapping | undefined, type: string, id: string): ScopeRef[] | string {
  if (answer === undefined) return parseScopes(text, type, id) ?? 'a malformed body';
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return 'a body that is not JSON';
  }
  if (answer.kind === 'self') return [{ type, id }];
  const refs: ScopeRef[] = [];
  for (const scope of answer.scopes) {
    const value = resolveJsonPointer(body, scope.tokens);
    if (value === undefined) return `no value at ${JSON.stringify(scope.pointer)}`;
    for (const item of Array.isArray(value) ? value : [value]) {
      const scopeId = jsonIdOf(item);
      if (scopeId === null) return `a value at ${JSON.stringify(scope.pointer)} that is not a string or an integer`;
      refs.push({ type: scope.type, id: scopeId });
    }
  }
  return refs;
}

/** The `{scopes?: [{type, id}]}` resolver document's scope refs; null when it is not one. */
function scopesOfDocument(body: unknown, type: string, id: string): ScopeRef[] | null {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return null;
  const scopes = (body as { scopes?: unknown }).scopes;
  if (scopes === undefined || scopes === null) return [{ type, id }];
  if (!Array.isArray(scopes)) return null;
  if (scopes.length === 0) return [{ type, id }];
  const refs: ScopeRef[] = [];
  for (const entry of scopes) {
    if (entry === null || typeof entry !== 'object') return null;
    const { type: refType, id: refId } = entry as { type?: unknown; id?: unknown };
    if (typeof refType !== 'string' || refType.length === 0) return null;
    if (typeof refId !== 'string' && typeof refId !== 'number') return null;
    refs.push({ type: refType, id: String(refId) });
  }
  return refs;
}
