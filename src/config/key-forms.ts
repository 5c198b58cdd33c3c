import * as path from 'node:path';
import type { AuthenticatorRegistry } from '../auth/authenticators';
import { isSection, type Data } from './config-data';
import { parseByteSize, parseDuration } from './durations';

/**
 * How a key of the schema becomes a property of `GatewayConfig`. Every leaf of config-schema.ts carries one under
 * this symbol (ajv and the reference see only string keys), so the written form (`RawConfig`), the typed form
 * (`GatewayConfig`) and the conversion between them are all read off the one declaration of the key: a key can be
 * neither missing from the typed form nor named there without being in the schema.
 */
export const TYPED = Symbol('typed form of a configuration key');

/** What a conversion may use besides the value: relative paths resolve against `cwd`. */
export interface ConversionContext {
  cwd: string;
  authenticators: AuthenticatorRegistry;
}

/**
 * `milliseconds`: a duration (`8h` or a number); `bytes`: a size (`16kb`); `path`: absolute from the working
 * directory; `as-written`: the value itself (a list copied); a function: a key whose typed form is its own.
 */
export type Conversion =
  | 'as-written'
  | 'milliseconds'
  | 'bytes'
  | 'path'
  // Contravariant on purpose: a conversion of any written type fits.
  | ((value: never, key: string, context: ConversionContext) => unknown);

/**
 * The typed form of one key. `Raw` and `Typed` exist for the compiler only (never set): `RawConfig` and
 * `GatewayConfig` are computed from them.
 */
export interface TypedForm<Raw, Typed, Name extends string | undefined = string | undefined, Suffix extends string = string> {
  readonly conversion: Conversion;
  /** The typed name when it is not the camelCase of the key (plus `suffix`); a dotted name nests (`accessLog.mode`). */
  readonly name: Name;
  /** After the camelCase of the key: `Ms` for a duration. */
  readonly suffix: Suffix;
  readonly types?: { readonly raw: Raw; readonly typed: Typed };
}

/** A typed form converted by one of the named conversions (`Suffix` after the camelCase name: `Ms`). */
export function form<Raw, Typed, Suffix extends string = ''>(
  conversion: Exclude<Conversion, (...args: never[]) => unknown>,
  suffix: Suffix = '' as Suffix,
): TypedForm<Raw, Typed, undefined, Suffix> {
  return { conversion, name: undefined, suffix };
}

/** A typed form of its own: what `convert` returns. */
export function converted<Raw, Typed>(convert: (value: Raw, key: string, context: ConversionContext) => Typed): TypedForm<Raw, Typed, undefined, ''> {
  return { conversion: convert, name: undefined, suffix: '' };
}

/** A leaf of the schema: its JSON schema, and its typed form under {@link TYPED}. */
export function key<S extends object, F extends TypedForm<unknown, unknown>>(schema: S, typedForm: F): S & { readonly [TYPED]: F } {
  return { ...schema, [TYPED]: typedForm };
}

/** The same key under a typed name that is not the camelCase of its own (`revalidate-interval` → `revalidateMs`). */
export function typedAs<const Name extends string, S extends { readonly [TYPED]: TypedForm<unknown, unknown, undefined, string> }>(
  name: Name,
  schema: S,
): Omit<S, typeof TYPED> & { readonly [TYPED]: TypedForm<RawOfForm<S>, TypedOfForm<S>, Name, ''> } {
  return { ...schema, [TYPED]: { ...schema[TYPED], name, suffix: '' } } as never;
}

type RawOfForm<S> = S extends { readonly [TYPED]: { readonly types?: { readonly raw: infer Raw } } } ? Raw : never;
type TypedOfForm<S> = S extends { readonly [TYPED]: { readonly types?: { readonly typed: infer Typed } } } ? Typed : never;

type CamelCase<S extends string> = S extends `${infer Head}-${infer Tail}` ? `${Head}${Capitalize<CamelCase<Tail>>}` : S;
type UnionToIntersection<U> = (U extends unknown ? (value: U) => void : never) extends (value: infer I) => void ? I : never;
/** Flattens intersections (`{ a: { x } } & { a: { y } }` → `{ a: { x, y } }`), leaving lists and functions alone. */
type Flat<T> = T extends (...args: never[]) => unknown ? T : T extends readonly unknown[] ? T : T extends object ? { [K in keyof T]: Flat<T[K]> } : T;
type Nest<Name extends string, Value> = Name extends `${infer Head}.${infer Tail}` ? { [K in Head]: Nest<Tail, Value> } : { [K in Name]: Value };

type IsNullable<S> = S extends { nullable: true } ? true : false;
type TypedNameOf<K extends string, S> = S extends { readonly [TYPED]: { readonly name: infer Name; readonly suffix: infer Suffix extends string } }
  ? [Name] extends [string]
    ? Name
    : `${CamelCase<K>}${Suffix}`
  : CamelCase<K>;

type RawNode<S> = S extends { readonly [TYPED]: unknown } ? RawOfForm<S> : S extends { properties: infer P } ? RawSection<P> : never;
type RawSection<P> = { [K in keyof P as IsNullable<P[K]> extends true ? never : K]: RawNode<P[K]> } & {
  [K in keyof P as IsNullable<P[K]> extends true ? K : never]?: RawNode<P[K]>;
};
type TypedNode<S> = S extends { readonly [TYPED]: unknown } ? TypedOfForm<S> : S extends { properties: infer P } ? TypedSection<P> : never;
type TypedSection<P> = UnionToIntersection<{ [K in keyof P & string]: Nest<TypedNameOf<K, P[K]>, TypedNode<P[K]>> }[keyof P & string]>;

/** The configuration as written, after defaults: kebab-case keys, durations and sizes as written. */
export type RawOf<Schema> = Flat<RawNode<Schema>>;
/** The configuration as the code sees it: camelCase names, milliseconds, bytes, absolute paths, unset values null. */
export type TypedOf<Schema> = Flat<TypedNode<Schema>>;

interface SchemaNode {
  type?: unknown;
  nullable?: boolean;
  properties?: Record<string, SchemaNode>;
  [TYPED]?: TypedForm<unknown, unknown>;
}

/** One key's way into the typed form: its dotted key, its typed path and how its value is converted. */
export interface TypedKey {
  key: string;
  typedPath: string[];
  conversion: Conversion;
}

/** The typed name of a key: the one it declares, else camelCase plus its suffix (`request-timeout` → `requestTimeoutMs`). */
function typedNameOf(name: string, form: TypedForm<unknown, unknown> | undefined): string {
  if (form?.name !== undefined) return form.name;
  return `${name.replace(/-([a-z0-9])/g, (_, letter: string) => letter.toUpperCase())}${form?.suffix ?? ''}`;
}

/**
 * Every key of `schema` with a typed form (a section's members; a key with its own conversion, such as the
 * `iam.authenticator` section, counts as one), in schema order. Throws on a leaf without a typed form.
 */
export function typedKeys(schema: object): TypedKey[] {
  const keys: TypedKey[] = [];
  const walk = (node: SchemaNode, prefix: string, typedPrefix: string[]): void => {
    for (const [name, child] of Object.entries(node.properties ?? {})) {
      const dotted = prefix === '' ? name : `${prefix}.${name}`;
      const form = child[TYPED];
      const typedPath = [...typedPrefix, ...typedNameOf(name, form).split('.')];
      if (form !== undefined) keys.push({ key: dotted, typedPath, conversion: form.conversion });
      else if (child.properties !== undefined) walk(child, dotted, typedPath);
      else throw new Error(`config schema: ${dotted} declares no typed form`);
    }
  };
  walk(schema as SchemaNode, '', []);
  return keys;
}

/** The validated written form → the typed form, key by key as the schema declares. Nothing here can fail. */
export function toTypedForm(schema: object, raw: Data, context: ConversionContext): Record<string, unknown> {
  const typed: Record<string, unknown> = {};
  for (const { key, typedPath, conversion } of typedKeys(schema)) {
    const value = key.split('.').reduce<unknown>((node, name) => (isSection(node) ? node[name] : undefined), raw);
    let target = typed;
    for (const name of typedPath.slice(0, -1)) target = (target[name] ??= {}) as Record<string, unknown>;
    target[typedPath[typedPath.length - 1]] = convert(conversion, value, key, context);
  }
  return typed;
}

function convert(conversion: Conversion, value: unknown, key: string, context: ConversionContext): unknown {
  if (value === undefined || value === null) return null; // only nullable keys: defaults set every other one
  if (conversion === 'milliseconds') return parseDuration(value as string | number, key);
  if (conversion === 'bytes') return parseByteSize(value as string | number, key);
  if (conversion === 'path') return path.resolve(context.cwd, value as string);
  if (conversion === 'as-written') return Array.isArray(value) ? [...(value as unknown[])] : value;
  return conversion(value as never, key, context);
}
