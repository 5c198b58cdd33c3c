import { AUTHENTICATORS, type AuthenticatorRegistry } from '../auth/authenticators';
import { listConfigKeys } from './config-schema';

/** The prefixes of the gateway's own environment names: a variable with one of them that nothing reads is likely a typo. */
const OWN_PREFIXES = ['IAM_', 'SERVER_'];

/**
 * One warning per variable of `env` named `IAM_…` or `SERVER_…` that neither a configuration key (its generic or
 * conventional name, listConfigKeys) nor `extraNames` (`IAM_CONFIG`) reads, with the closest known name when one is
 * close: `unknown environment variable IAM_POLICY_DIRR (did you mean IAM_POLICY_DIR?)`. Values are never read.
 */
export function unknownEnvironmentWarnings(env: NodeJS.ProcessEnv, extraNames: readonly string[], authenticators: AuthenticatorRegistry = AUTHENTICATORS): string[] {
  const known = [...listConfigKeys(authenticators).flatMap(({ env: generic, alias }) => (alias === undefined ? [generic] : [generic, alias])), ...extraNames];
  const knownSet = new Set(known);
  const warnings: string[] = [];
  for (const name of Object.keys(env).sort()) {
    if (!OWN_PREFIXES.some((prefix) => name.startsWith(prefix)) || knownSet.has(name)) continue;
    const suggestion = closestName(name, known);
    warnings.push(`unknown environment variable ${name}${suggestion === null ? '' : ` (did you mean ${suggestion}?)`}`);
  }
  return warnings;
}

/**
 * The name of `candidates` closest to `name` by edit distance, when it is close: at most 3 edits and at most a
 * third of `name`'s length (`IAM_X` suggests nothing). Ties go to the earlier candidate; null when none is close.
 */
export function closestName(name: string, candidates: readonly string[]): string | null {
  const limit = Math.min(3, Math.floor(name.length / 3));
  let best: string | null = null;
  let bestDistance = limit + 1;
  for (const candidate of candidates) {
    const distance = editDistance(name, candidate, bestDistance);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/**
 * Edits (insert, delete, replace, swap of two neighbours) that turn `a` into `b` (optimal string alignment
 * distance); any value of `bound` or more means "at least `bound`", so distant names cost little.
 */
export function editDistance(a: string, b: string, bound = Number.POSITIVE_INFINITY): number {
  if (Math.abs(a.length - b.length) >= bound) return bound;
  let beforePrevious: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) value = Math.min(value, beforePrevious[j - 2] + 1);
      current.push(value);
      rowMin = Math.min(rowMin, value);
    }
    if (rowMin >= bound) return bound;
    beforePrevious = previous;
    previous = current;
  }
  return Math.min(previous[b.length], bound);
}
