/**
 * The query of a declared route (route-declaration.ts `query`): one object schema gives the operation's query
 * `parameters` and the check the router runs before the handler, so the parameters a route documents and the ones
 * it accepts are the same. A query arrives as text: an integer parameter is read as digits only (no sign, exponent or
 * space), then the schema decides.
 */
import type { TObject, TSchema } from '@sinclair/typebox';
import type { ParsedUrlQuery } from 'node:querystring';
import type { Context as KoaContext } from 'koa';
import { problems } from '../domain/problem';
import { pointerErrors, type PointerError } from '../domain/schema-errors';
import type { JsonSchema, ParameterObject } from './openapi-types';
import { createBodyValidator, isStorableText } from './validate-body';

/** The query a handler reads: checked by the validator the router compiled from the declaration. */
export interface QueryReader<Query> {
  /** The request's query, with the schema's defaults, or 400 IAM_VALIDATION_FAILED naming each bad parameter. */
  read(ctx: KoaContext): Query;
}

interface ParameterSchema {
  type?: string;
  description?: string;
  minimum?: number;
  minLength?: number;
  maxLength?: number;
  format?: string;
}

/** What the bound of a parameter means, in the words a client reads (a query's value is always text). */
function wording(schema: ParameterSchema, keyword: string): string | null {
  if (schema.type === 'integer') return `must be a whole number of at least ${schema.minimum ?? 0}`;
  if (schema.format === 'date-time' && keyword === 'format') return 'must be an ISO 8601 timestamp with a zone, e.g. 2026-01-31T12:00:00Z';
  if (keyword === 'minLength' || keyword === 'maxLength') return schema.maxLength === undefined ? `must be at least ${schema.minLength ?? 0} characters` : `must be ${schema.minLength ?? 0} to ${schema.maxLength} characters`;
  return null;
}

function propertiesOf(query: TObject, where: string): Record<string, ParameterSchema> {
  const properties = query.properties as Record<string, TSchema & ParameterSchema>;
  for (const [name, schema] of Object.entries(properties)) {
    if (schema.type !== 'string' && schema.type !== 'integer') throw new Error(`route ${where}: query parameter ${name} is neither a string nor an integer`);
  }
  return properties;
}

/** The operation's query `parameters`, one per property of the declared schema, in its order. */
export function queryParametersOf(query: TObject): ParameterObject[] {
  const required = new Set<string>((query.required as string[] | undefined) ?? []);
  return Object.entries(query.properties as Record<string, TSchema & ParameterSchema>).map(([name, property]) => {
    const { description, ...schema } = JSON.parse(JSON.stringify(property)) as JsonSchema & { description?: string };
    return { name, in: 'query', ...(description ? { description } : {}), ...(required.has(name) ? { required: true } : {}), schema };
  });
}

/**
 * Compiles the reader of a declared query. Without a declared query the handler reads none (asking for it is a bug),
 * and the router leaves the query alone.
 */
export function queryReaderOf<Query>(query: TObject | undefined, where: string): QueryReader<Query> {
  if (query === undefined) {
    return {
      read: () => {
        throw new Error(`route ${where} declares no query`);
      },
    };
  }
  const properties = propertiesOf(query, where);
  const validate = createBodyValidator({ useDefaults: true }).compile(query);
  if (query.additionalProperties !== false) {
    return {
      read: (ctx) => {
        const values: Record<string, unknown> = {};
        for (const [name, value] of Object.entries(ctx.query as ParsedUrlQuery)) {
          const schema = properties[name];
          if (schema === undefined || typeof value !== 'string' || !isStorableText(value)) continue;
          values[name] = schema.type === 'integer' && /^[0-9]{1,15}$/.test(value) ? Number(value) : value;
        }
        if (!validate(values)) {
          // A value it refuses is left out (a page's parameter never fails its page); the rest take their defaults.
          for (const error of validate.errors ?? []) delete values[error.instancePath.slice(1)];
          validate(values);
        }
        return values as Query;
      },
    };
  }
  return {
    read: (ctx) => {
      const given = ctx.query as ParsedUrlQuery;
      const errors: PointerError[] = [];
      const values: Record<string, unknown> = {};
      for (const [name, value] of Object.entries(given)) {
        const schema = properties[name];
        if (schema === undefined) errors.push({ pointer: `/${name}`, message: 'is not an allowed parameter' });
        else if (Array.isArray(value)) errors.push({ pointer: `/${name}`, message: 'must be given once' });
        else if (value !== undefined && !isStorableText(value)) errors.push({ pointer: `/${name}`, message: 'must not contain control characters or lone surrogates' });
        else values[name] = schema.type === 'integer' && value !== undefined && /^[0-9]{1,15}$/.test(value) ? Number(value) : value;
      }
      if (!validate(values)) {
        const named = new Set<string>();
        for (const error of validate.errors ?? []) {
          const name = error.instancePath.slice(1);
          const message = properties[name] === undefined ? null : wording(properties[name], error.keyword);
          if (message === null || named.has(name)) continue;
          named.add(name);
          errors.push({ pointer: error.instancePath, message });
        }
        for (const error of pointerErrors((validate.errors ?? []).filter((error) => !named.has(error.instancePath.slice(1))))) errors.push(error);
      }
      if (errors.length > 0) throw problems.validation(errors, 'The query is not valid.');
      return values as Query;
    },
  };
}
