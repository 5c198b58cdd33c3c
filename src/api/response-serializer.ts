/**
 * A declared response serialized from its schema (the model of fastify's response schemas): what a route answers is
 * what its declaration says, property by property, so a field a handler adds by mistake (a hash, an internal id, a
 * token) never leaves the gateway — it is not in the schema, so it is not in the answer. The schema is the one
 * source: the OpenAPI document shows it, the end-to-end tests validate real answers with it, and this writes them.
 *
 * The serializer is compiled once per route at registration: a `$ref` to a component of `schemas/components.ts` is
 * followed, `allOf` merges its members' properties, `anyOf`/`oneOf` take the first member whose shape the value has
 * (its JSON type, its required properties, no property a closed object refuses), arrays serialize each item by
 * `items`, and an object keeps the properties it declares — and others only when it is open (no
 * `additionalProperties: false`). Scalars are written as they are (a `Date` as its ISO string, as `JSON.stringify`
 * does).
 */
import type { TSchema } from '@sinclair/typebox';
import { componentSchemas } from './schemas/components';

/** Turns a handler's `ctx.body` into the JSON text of its declared response. */
export type ResponseSerializer = (value: unknown) => string;

type Schema = Record<string, unknown>;
type Project = (value: unknown) => unknown;

/** What a value must look like for a union member to be the one that serializes it. */
interface Shape {
  types: ReadonlySet<string> | null;
  required: readonly string[];
  /** The properties a closed object allows; null for an open one (or a non-object). */
  closed: ReadonlySet<string> | null;
  constants: ReadonlyMap<string, unknown>;
}

const COMPONENT_REF = /^#\/components\/schemas\/([A-Za-z0-9_]+)$/;

function resolve(schema: Schema, where: string): Schema {
  let current = schema;
  for (let hops = 0; typeof current.$ref === 'string'; hops++) {
    const name = COMPONENT_REF.exec(current.$ref)?.[1];
    const component = name === undefined ? undefined : (componentSchemas[name] as Schema | undefined);
    if (component === undefined || hops > 16) throw new Error(`response of ${where}: cannot follow ${JSON.stringify(current.$ref)}`);
    current = component;
  }
  return current;
}

/** A value JSON.stringify writes by its `toJSON()` (a `Date`, from this realm or another: a database driver's). */
function hasToJson(value: unknown): value is { toJSON(): unknown } {
  return typeof value === 'object' && value !== null && typeof (value as { toJSON?: unknown }).toJSON === 'function';
}

/** The JSON type of a value, as JSON Schema names it (`integer` also matches `number`). */
function jsonTypeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (hasToJson(value)) return jsonTypeOf(value.toJSON());
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function typeMatches(types: ReadonlySet<string>, value: unknown): boolean {
  const type = jsonTypeOf(value);
  return types.has(type) || (type === 'integer' && types.has('number'));
}

/** The members `allOf` merges, each resolved. */
function membersOf(schema: Schema, where: string): Schema[] {
  const resolved = resolve(schema, where);
  const all = resolved.allOf as Schema[] | undefined;
  return all === undefined ? [resolved] : [resolved, ...all.flatMap((member) => membersOf(member, where))];
}

function shapeOf(schema: Schema, where: string): Shape {
  const members = membersOf(schema, where);
  let types: Set<string> | null = null;
  const required: string[] = [];
  const constants = new Map<string, unknown>();
  let closed: Set<string> | null = null;
  for (const member of members) {
    const type = member.type as string | string[] | undefined;
    if (type !== undefined) types = new Set(Array.isArray(type) ? type : [type]);
    if (Array.isArray(member.required)) required.push(...(member.required as string[]));
    const properties = (member.properties ?? {}) as Record<string, Schema>;
    for (const [key, property] of Object.entries(properties)) if ('const' in property) constants.set(key, property.const);
    if (member.additionalProperties === false) closed = new Set([...(closed ?? []), ...Object.keys(properties)]);
    else if (closed !== null) for (const key of Object.keys(properties)) closed.add(key);
  }
  if ('const' in members[0]!) types = new Set([jsonTypeOf(members[0]!.const)]);
  return { types, required, closed, constants };
}

function hasShape(shape: Shape, value: unknown): boolean {
  if (shape.types !== null && !typeMatches(shape.types, value)) return false;
  if (value === null || typeof value !== 'object' || Array.isArray(value) || hasToJson(value)) return shape.required.length === 0 || shape.types !== null;
  const record = value as Record<string, unknown>;
  if (!shape.required.every((key) => record[key] !== undefined)) return false;
  for (const [key, constant] of shape.constants) if (key in record && record[key] !== constant) return false;
  return shape.closed === null || Object.keys(record).every((key) => record[key] === undefined || shape.closed!.has(key));
}

function compile(schema: Schema, where: string, seen: Map<Schema, Project>): Project {
  const cached = seen.get(schema);
  if (cached !== undefined) return cached;
  // A placeholder first: a component that refers to itself (directly or not) compiles once.
  let compiled: Project = (value) => value;
  seen.set(schema, (value) => compiled(value));
  const members = membersOf(schema, where);
  const union = (members[0]!.anyOf ?? members[0]!.oneOf) as Schema[] | undefined;
  if (union !== undefined) {
    const choices = union.map((member) => ({ shape: shapeOf(member, where), project: compile(member, where, seen) }));
    compiled = (input) => {
      const value = hasToJson(input) ? input.toJSON() : input;
      const choice = choices.find(({ shape }) => hasShape(shape, value));
      if (choice === undefined) throw new Error(`response of ${where}: the answer matches none of its declared forms`);
      return choice.project(value);
    };
  } else {
    const properties = new Map<string, Project>();
    let open = true;
    let items: Project | null = null;
    for (const member of members) {
      for (const [key, property] of Object.entries((member.properties ?? {}) as Record<string, Schema>)) {
        if (!properties.has(key)) properties.set(key, compile(property, where, seen));
      }
      if (member.additionalProperties === false) open = false;
      if (member.items !== undefined && items === null) items = compile(member.items as Schema, where, seen);
    }
    const each = items;
    compiled = (value) => {
      if (hasToJson(value)) return value.toJSON();
      if (value === null || typeof value !== 'object') return value;
      if (Array.isArray(value)) return each === null ? (value as unknown[]) : (value as unknown[]).map((item) => each(item));
      const output: Record<string, unknown> = {};
      for (const [key, child] of Object.entries(value as Record<string, unknown>)) {
        const project = properties.get(key);
        if (project !== undefined) output[key] = project(child);
        else if (open) output[key] = child;
      }
      return output;
    };
  }
  return compiled;
}

/** The serializer of a declared response schema; `where` (`GET /iam/…`) names the route in a compile error. */
export function compileResponseSerializer(schema: TSchema, where: string): ResponseSerializer {
  const project = compile(schema as unknown as Schema, where, new Map());
  return (value) => JSON.stringify(project(value));
}
