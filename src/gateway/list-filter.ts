/**
 * Lists filtered by the gateway (policy `filter`, docs/policy-format.md): the host's JSON answer to a `GET` keeps only
 * the elements whose id the caller's plan covers. Everything here fails closed: an answer that cannot be read as the
 * declared list is a reason to refuse it (502 `IAM_FILTER_FAILED`), never a reason to pass it on unfiltered.
 */
import type { ResourcePlan } from '../authz/decision-engine';
import type { RouteFilter } from '../policy/compiled-policy';
import { jsonIdOf, resolveJsonPointer } from '../domain/json-pointer';

/** What an allowed request of a filtered route carries to the forwarder: the route's filter and the ids it keeps. */
export interface ListFilterPlan {
  filter: RouteFilter;
  /** The plan's ids (`SOME`), or none at all (`NONE`). */
  keep: ReadonlySet<string>;
}

/** The filter to apply for a plan, or null for `ALL`: that answer is forwarded as the host sent it. */
export function listFilterPlan(filter: RouteFilter, plan: ResourcePlan): ListFilterPlan | null {
  if (plan.kind === 'ALL') return null;
  return { filter, keep: plan.kind === 'SOME' ? new Set(plan.ids) : new Set() };
}

/**
 * Response headers that describe the host's unfiltered body, dropped from a filtered answer (`Content-Length` is
 * computed again). `Last-Modified` and `Link` (the host's next page) stay.
 */
export const UNFILTERED_BODY_HEADERS: ReadonlySet<string> = new Set(['etag', 'content-md5', 'digest', 'content-digest', 'repr-digest', 'content-range', 'x-total-count', 'content-length']);

/**
 * Request headers the host does not receive on a filtered request: the gateway asks for the whole body, uncompressed
 * (`Accept-Encoding: identity` is sent instead), and never for a part or a "not modified" of it — a 304 would confirm
 * a copy filtered under the caller's earlier scopes.
 */
export const UNFILTERABLE_REQUEST_HEADERS: ReadonlySet<string> = new Set(['accept-encoding', 'range', 'if-range', 'if-none-match', 'if-modified-since', 'if-match', 'if-unmodified-since']);

/** The host's request headers of a filtered request: {@link UNFILTERABLE_REQUEST_HEADERS} out, `Accept-Encoding: identity` in. */
export function filteredRequestHeaders(headers: readonly string[]): string[] {
  const out: string[] = [];
  for (let index = 0; index < headers.length; index += 2) {
    if (UNFILTERABLE_REQUEST_HEADERS.has(headers[index]!.toLowerCase())) continue;
    out.push(headers[index]!, headers[index + 1]!);
  }
  out.push('accept-encoding', 'identity');
  return out;
}

/** Whether an answer with this status is filtered: a 2xx with a body. Any other passes as the host sent it. */
export function isFilteredStatus(status: number): boolean {
  return status >= 200 && status < 300 && status !== 204 && status !== 205;
}

/** The host's response headers that decide whether its answer can be read as JSON at all. */
export interface AnswerHeaders {
  contentType: string | undefined;
  contentEncoding: string | undefined;
  contentLength: string | undefined;
}

/**
 * Why the host's answer cannot be filtered, judging by its headers (null: read it): compressed, not JSON (by its
 * media type: `application/json` or `application/*+json`, UTF-8), or announcing more than `maxBytes`.
 */
export function unfilterableAnswer(headers: AnswerHeaders, maxBytes: number): string | null {
  const encoding = headers.contentEncoding?.trim().toLowerCase();
  if (encoding !== undefined && encoding !== '' && encoding !== 'identity') return `the answer is encoded (${encoding}), not identity`;
  const [mediaType = '', ...parameters] = (headers.contentType ?? '').split(';').map((part) => part.trim().toLowerCase());
  if (mediaType !== 'application/json' && !/^application\/[a-z0-9!#$&^_.+-]+\+json$/.test(mediaType)) return `the answer is not JSON (content-type ${mediaType === '' ? 'missing' : mediaType})`;
  for (const parameter of parameters) {
    const [name, value = ''] = parameter.split('=', 2).map((part) => part.trim());
    if (name === 'charset' && value.replace(/"/g, '') !== 'utf-8') return `the answer is not UTF-8 (charset ${value})`;
  }
  if (headers.contentLength !== undefined) {
    const length = Number(headers.contentLength);
    if (Number.isFinite(length) && length > maxBytes) return `the answer is larger than upstream.filter-max-bytes (${maxBytes} bytes)`;
  }
  return null;
}

/** The chunks of a body read up to a bound: the host's answer is buffered whole, never more than `maxBytes`. */
export class BoundedBody {
  private readonly chunks: Buffer[] = [];
  private length = 0;

  constructor(readonly maxBytes: number) {}

  /** Keeps a chunk; false (and keeps nothing more) once the body is larger than the bound. */
  add(chunk: Buffer): boolean {
    this.length += chunk.length;
    if (this.length > this.maxBytes) {
      this.chunks.length = 0;
      return false;
    }
    this.chunks.push(chunk);
    return true;
  }

  get bytes(): number {
    return this.length;
  }

  body(): Buffer {
    return this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.length);
  }
}

/** An element's id as the plan's ids are written (domain/json-pointer.ts): null for a value that names no id. */
export const elementId = jsonIdOf;

export type FilterOutcome = { ok: true; body: Buffer; kept: number; removed: number } | { ok: false; reason: string };

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The host's JSON answer with only the elements of the `items` array whose id (the `id` pointer inside the element)
 * is in `plan.keep`; an element whose id is missing or not a string or an integer is removed. The result is the
 * parsed answer written again (`JSON.stringify`): what was checked is exactly what is sent. Fails (`ok: false`) when
 * the body is not UTF-8 JSON, or `items` does not point at an array.
 */
export function filterList(body: Buffer, plan: ListFilterPlan): FilterOutcome {
  let document: unknown;
  try {
    document = JSON.parse(UTF8.decode(body));
  } catch {
    return { ok: false, reason: 'the answer is not valid UTF-8 JSON' };
  }
  const { itemsTokens, idTokens, items } = plan.filter;
  const list = resolveJsonPointer(document, itemsTokens);
  if (!Array.isArray(list)) return { ok: false, reason: `the answer has no array at ${items === '' ? 'its top level' : items}` };
  const kept: unknown[] = [];
  for (const element of list) {
    const id = elementId(resolveJsonPointer(element, idTokens));
    if (id !== null && plan.keep.has(id)) kept.push(element);
  }
  const filtered = itemsTokens.length === 0 ? kept : replaceAt(document, itemsTokens, kept);
  return { ok: true, body: Buffer.from(JSON.stringify(filtered)), kept: kept.length, removed: list.length - kept.length };
}

/** `document` with the value at `tokens` (which exists: the array just read) replaced by `value`, in place. */
function replaceAt(document: unknown, tokens: readonly string[], value: unknown): unknown {
  let parent = document as Record<string, unknown>;
  for (const token of tokens.slice(0, -1)) parent = parent[Array.isArray(parent) ? Number(token) : token] as Record<string, unknown>;
  const last = tokens[tokens.length - 1]!;
  if (Array.isArray(parent)) parent[Number(last)] = value;
  // Defined, not assigned: a member named `__proto__` (JSON.parse makes it an own member) stays a member.
  else Object.defineProperty(parent, last, { value, writable: true, enumerable: true, configurable: true });
  return document;
}
