/**
 * `policy coverage --openapi FILE` (docs/policy-format.md): which operations of the host's
 * OpenAPI description (3.0 or 3.1, JSON or YAML) no policy route covers — they fall to `default` — and
 * which policy routes match no operation (stale or mistyped routes). A report, not a gate, unless asked.
 */
import { parseDocument } from 'yaml';
import { yamlErrorReports } from '../policy/yaml-errors';
import type { CompiledPolicy, CompiledRoute } from '../policy/compiled-policy';
import { parseRoutePattern, type PatternSegment } from '../policy/route-tree';

/** One operation of the OpenAPI document. */
export interface OpenApiOperation {
  /** Upper case. */
  method: string;
  /** The path template with the base path, as shown to users (`/api/projects/{projectId}`). */
  path: string;
  operationId?: string;
  /** Segments: literal text, or `templated` when the segment holds a `{param}` (matches any value). */
  segments: Array<{ value: string; templated: boolean }>;
}

/** The OpenAPI description cannot be used; the message says why. */
export class OpenApiError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OpenApiError';
  }
}

export interface CoverageReport {
  /** Every operation with the route the gateway selects for it (null: unmatched, `default` decides). */
  operations: Array<{ operation: OpenApiOperation; route: CompiledRoute | null }>;
  uncovered: OpenApiOperation[];
  /** Policy routes whose pattern and methods match no operation. */
  unusedRoutes: CompiledRoute[];
}

const OPERATION_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/**
 * The operations of an OpenAPI 3.x document (`paths`, with local `$ref` path items), each path prefixed
 * with `basePath` — by default the path of the first `servers` URL (server variables at their defaults).
 */
export function parseOpenApiOperations(text: string, options: { basePath?: string } = {}): OpenApiOperation[] {
  const doc = parseDocument(text, { prettyErrors: true });
  if (doc.errors.length > 0) throw new OpenApiError(`not valid JSON or YAML: ${yamlErrorReports(text, doc.errors)[0]!.message}`);
  const root = doc.toJS({ maxAliasCount: 1000 }) as unknown;
  if (!isObject(root)) throw new OpenApiError('not an OpenAPI document (the top level is not an object)');
  if (typeof root.swagger === 'string') throw new OpenApiError(`Swagger ${root.swagger} is not supported; convert it to OpenAPI 3`);
  if (typeof root.openapi !== 'string' || !root.openapi.startsWith('3.')) throw new OpenApiError('not an OpenAPI 3.x document (no "openapi: 3.x" field)');
  const paths = root.paths ?? {};
  if (!isObject(paths)) throw new OpenApiError('"paths" is not an object');
  const basePath = trimSlash(options.basePath ?? serverBasePath(root.servers));

  const operations: OpenApiOperation[] = [];
  for (const [template, rawItem] of Object.entries(paths)) {
    if (!template.startsWith('/')) throw new OpenApiError(`path "${template}" does not start with "/"`);
    const item = resolveLocalRef(root, rawItem);
    if (!isObject(item)) continue;
    const path = basePath + (template === '/' && basePath !== '' ? '' : template);
    const segments = path
      .split('/')
      .filter((part) => part !== '')
      .map((value) => ({ value, templated: value.includes('{') }));
    for (const method of OPERATION_METHODS) {
      const operation = item[method];
      if (!isObject(operation)) continue;
      operations.push({
        method: method.toUpperCase(),
        path: path === '' ? '/' : path,
        ...(typeof operation.operationId === 'string' ? { operationId: operation.operationId } : {}),
        segments,
      });
    }
  }
  return operations;
}

/** Matches every operation against the policy, and every route against the operations. */
export function computeCoverage(policy: CompiledPolicy, operations: readonly OpenApiOperation[]): CoverageReport {
  const matched = operations.map((operation) => ({ operation, route: policy.match(operation.method, standInPath(operation))?.route ?? null }));
  const unusedRoutes = policy.routes.filter((route) => {
    const parsed = parseRoutePattern(route.pattern);
    const segments = parsed.ok ? parsed.segments : [];
    return !operations.some((operation) => methodMatches(route, operation.method) && intersects(segments, operation.segments, 0, 0));
  });
  return { operations: matched, uncovered: matched.filter((entry) => entry.route === null).map((entry) => entry.operation), unusedRoutes };
}

/** The report as lines; `verbose` also lists each covered operation with its route. */
export function formatCoverageReport(
  report: CoverageReport,
  policy: CompiledPolicy,
  options: { openapiLabel: string; policyLabel: string; verbose?: boolean },
): string[] {
  const lines: string[] = [];
  const show = (operation: OpenApiOperation): string => `${operation.method} ${operation.path}${operation.operationId ? ` (${operation.operationId})` : ''}`;
  lines.push(`openapi: ${options.openapiLabel}, ${report.operations.length} operations; policy: ${options.policyLabel}, ${policy.routes.length} routes`);
  if (options.verbose) {
    lines.push('covered operations:');
    for (const { operation, route } of report.operations) if (route) lines.push(`  ${show(operation)} → ${route.id} ${route.methods.join(',')} ${route.pattern}`);
  }
  lines.push(report.uncovered.length === 0 ? 'uncovered operations: none' : `uncovered operations (no route matches; they fall to default: ${policy.defaultAction}):`);
  for (const operation of report.uncovered) lines.push(`  ${show(operation)}`);
  lines.push(report.unusedRoutes.length === 0 ? 'routes matching no operation: none' : 'routes matching no operation:');
  for (const route of report.unusedRoutes) lines.push(`  ${route.id}  ${route.methods.join(',')} ${route.pattern}`);
  const covered = report.operations.length - report.uncovered.length;
  lines.push(`${covered} of ${report.operations.length} operations covered, ${report.uncovered.length} uncovered; ${report.unusedRoutes.length} of ${policy.routes.length} routes match no operation`);
  return lines;
}

// ---------------------------------------------------------------- helpers

/** A request path for the operation: each templated segment becomes a value no static route segment can equal. */
function standInPath(operation: OpenApiOperation): string {
  return `/${operation.segments.map((segment, index) => (segment.templated ? `\u0001${index}` : segment.value)).join('/')}`;
}

function methodMatches(route: CompiledRoute, method: string): boolean {
  return route.methods[0] === '*' || route.methods.includes(method) || (method === 'HEAD' && route.methods.includes('GET'));
}

/** True when some request path matches both the route pattern and the operation template. */
function intersects(route: readonly PatternSegment[], operation: OpenApiOperation['segments'], i: number, j: number): boolean {
  if (i === route.length) return j === operation.length;
  const segment = route[i];
  if (segment.kind === 'wildcard') return true;
  if (j === operation.length) return false;
  const part = operation[j];
  if (segment.kind === 'static' && !part.templated && segment.value !== part.value) return false;
  return intersects(route, operation, i + 1, j + 1);
}

function serverBasePath(servers: unknown): string {
  if (!Array.isArray(servers) || !isObject(servers[0]) || typeof servers[0].url !== 'string') return '';
  const server = servers[0];
  const variables = isObject(server.variables) ? server.variables : {};
  const url = (server.url as string).replace(/\{([^}]+)\}/g, (_all, name: string) => {
    const variable = variables[name];
    return isObject(variable) && typeof variable.default === 'string' ? variable.default : '';
  });
  if (url.startsWith('/')) return url;
  try {
    return new URL(url).pathname;
  } catch {
    return '';
  }
}

function trimSlash(path: string): string {
  let end = path.length;
  while (end > 0 && path.charCodeAt(end - 1) === 0x2f) end--;
  const trimmed = path.slice(0, end);
  return trimmed === '' || trimmed.startsWith('/') ? trimmed : `/${trimmed}`;
}

/** Resolves `{$ref: "#/..."}` within the document (path items may be shared in 3.1 `components.pathItems`). */
function resolveLocalRef(root: Record<string, unknown>, value: unknown): unknown {
  let current = value;
  for (let depth = 0; depth < 10 && isObject(current) && typeof current.$ref === 'string'; depth++) {
    const ref = current.$ref as string;
    if (!ref.startsWith('#/')) return null;
    current = ref
      .slice(2)
      .split('/')
      .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce<unknown>((node, key) => (isObject(node) ? node[key] : undefined), root);
  }
  return current;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
