/**
 * Small TypeBox builders for the `/iam` schemas (src/api/schemas/). A TypeBox schema is plain JSON Schema
 * (2020-12): ajv validates request bodies with it, `Static<typeof X>` is its TypeScript type, and the OpenAPI
 * document (src/api/openapi-document.ts) embeds it as it is.
 */
import { Type, type ObjectOptions, type SchemaOptions, type Static, type StringOptions, type TProperties, type TSchema, type TUnsafe } from '@sinclair/typebox';
import { HEADER_SAFE_PATTERN, IDENTIFIER_PATTERN } from '../../auth/identity-validation';

/** An object that rejects unknown properties; optional members are `Type.Optional(...)`. */
export const StrictObject = <T extends TProperties>(properties: T, options: ObjectOptions = {}) => Type.Object(properties, { additionalProperties: false, ...options });

/**
 * An id the admin API names in a path (docs/http-contract.md): visible ASCII without `/`, `\\`, `%` and `;`, not `.`
 * or `..`, 1–200 characters. Request bodies use it; responses use {@link HeaderSafe}, which also holds ids stored
 * before the rule.
 */
export const Identifier = (description?: string) => Type.String({ pattern: IDENTIFIER_PATTERN, ...(description ? { description } : {}) });

/** A value that travels in headers (an identity domain, a scope): visible ASCII, 1–200 characters. */
export const HeaderSafe = (description?: string) => Type.String({ pattern: HEADER_SAFE_PATTERN, ...(description ? { description } : {}) });

/** An ISO 8601 UTC instant. */
export const Timestamp = (description: string) => Type.String({ format: 'date-time', description });

/** `T` or null (`anyOf`, so the member keeps its own constraints). */
export const Nullable = <T extends TSchema>(schema: T, options: SchemaOptions = {}) => Type.Union([schema, Type.Null()], options);

/** A string or null. */
export const NullableString = (options: StringOptions = {}) => Type.Union([Type.String(), Type.Null()], options);

/** One of `values`, as a JSON Schema `enum` (ajv answers "must be one of …", not one error per member). */
export const Enum = <T extends string | number>(values: readonly T[], options: SchemaOptions = {}): TUnsafe<T> => Type.Unsafe<T>({ enum: [...values], ...options });

/**
 * A `$ref` to the OpenAPI component `name`, typed as the component `T` (`Ref<typeof Scope>('Scope')`). Only in
 * response schemas: they are compiled together with every component (request bodies are self-contained).
 */
export const Ref = <T extends TSchema>(name: string): TUnsafe<Static<T>> => Type.Unsafe<Static<T>>({ $ref: `#/components/schemas/${name}` });
