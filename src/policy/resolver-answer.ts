/**
 * What a resolver's answer means, in words and as a comparison: one place for every tool that shows a resolver
 * (`policy explain`), compares two (`policy diff`, `policy replay`) or reuses what one answered (candidate decisions).
 */
import type { ResolverAnswerMapping, ResourceResolverConfig } from './compiled-policy';

/** `{scopes} document`, `self`, or `PROJECT from /projectId, TEAM from /teamIds`. */
export function describeResolverAnswer(answer: ResolverAnswerMapping | undefined): string {
  if (answer === undefined) return '{scopes} document';
  if (answer.kind === 'self') return 'self';
  return answer.scopes.map((scope) => `${scope.type} from ${JSON.stringify(scope.pointer)}`).join(', ');
}

/** Whether two resolvers ask the same URL and read its answer the same way: then they answer the same scopes. */
export function sameResolution(a: ResourceResolverConfig, b: ResourceResolverConfig): boolean {
  return a.url === b.url && describeResolverAnswer(a.answer) === describeResolverAnswer(b.answer);
}
