/** The policy module's public API: load and compile policy files, match routes (docs/policy-format.md). */
export type {
  AccessMode,
  CompiledPolicy,
  CompiledRoute,
  DefaultAction,
  MethodRefusal,
  PolicyIssue,
  PolicyLoadResult,
  ResourceResolverConfig,
  RouteMatch,
  RouteResource,
  SourceLocation,
} from './compiled-policy';
export {
  compilePolicyFiles,
  hashPolicyFiles,
  loadPolicyDirectory,
  readPolicyDirectory,
  type PolicyFileText,
  type PolicyLoadOptions,
} from './load-policy-directory';
export { compilePolicy, type CompileContext } from './policy-compiler';
export { parsePolicyFile, type ParsedPolicyFile } from './policy-parser';
export {
  POLICY_METHODS,
  policyFileSchema,
  policyFileValidator,
  type PolicyFileDocument,
  type PolicyMatchOptions,
  type PolicyResourceDeclaration,
  type PolicyResolverDeclaration,
  type PolicyRouteEntry,
  type PolicyRouteResource,
} from './policy-schema';
export { parseRoutePattern, RouteTree, type MatchCounter, type ParsedPattern, type PatternSegment, type RouteTreeOptions } from './route-tree';
