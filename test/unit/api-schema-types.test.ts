/**
 * The `/iam` schemas are the one definition of every body (src/api/schemas/): request bodies are validated
 * with them and typed by them; for responses, what the handlers return must have the schema's `Static` type.
 * The type checks below fail `npm run typecheck` (part of `npm run lint`) when a domain type and its
 * documented schema drift apart; the runtime checks show the schemas are what ajv and the document use.
 */
import type { Static, TSchema } from '@sinclair/typebox';
import type { Page } from '../../src/api/admin-service';
import { openApiDocument } from '../../src/api/openapi-document';
import { componentSchemas } from '../../src/api/schemas/components';
import { DiagnosticsRequest, loginRequest, LoginRequest, ScopesInput, TemplateInput } from '../../src/api/schemas/requests';
import type * as Responses from '../../src/api/schemas/responses';
import { assertValid, createBodyValidator } from '../../src/api/validate-body';
import { FAILED_STEP_CODES, PASSED_STEP_CODES, type AuthorizationDecision } from '../../src/authz/decision';
import type { IamPrincipal } from '../../src/domain/principal';
import { ProblemError, type ProblemBody } from '../../src/domain/problem';
import type { IdentityRecord, ProfileRecord, StoredAuditEvent, TemplateRecord, UserRecord } from '../../src/domain/records';
import type { AuthenticationResult, SessionView } from '../../src/sessions/session-service';

/** What `JSON.stringify` makes of a value: dates become strings. */
type Json<T> = T extends Date ? string : T extends Array<infer U> ? Array<Json<U>> : T extends object ? { [K in keyof T]: Json<T[K]> } : T;
/** `true` when every `T` is a valid `S` body (as far as TypeScript can tell). */
type Conforms<T, S extends TSchema> = [Json<T>] extends [Static<S>] ? true : false;

// Each line fails to compile when the handler's type and the documented schema disagree.
const conforming: Array<true> = [
  true satisfies Conforms<ProblemBody, typeof Responses.Problem>,
  true satisfies Conforms<IamPrincipal, typeof Responses.Principal>,
  true satisfies Conforms<AuthenticationResult, typeof Responses.AuthenticationResult>,
  true satisfies Conforms<SessionView, typeof Responses.Session>,
  true satisfies Conforms<ProfileRecord, typeof Responses.Profile>,
  true satisfies Conforms<AuthorizationDecision, typeof Responses.Decision>,
  true satisfies Conforms<TemplateRecord, typeof Responses.Template>,
  true satisfies Conforms<UserRecord, typeof Responses.User>,
  true satisfies Conforms<IdentityRecord, typeof Responses.Identity>,
  true satisfies Conforms<StoredAuditEvent, typeof Responses.AuditEvent>,
  true satisfies Conforms<Page<UserRecord>['nextCursor'], typeof Responses.UserPage.properties.nextCursor>,
];

describe('one schema per /iam body', () => {
  it('types what the handlers return (checked when the file compiles)', () => {
    expect(conforming.length).toBe(11);
  });

  it('is the schema the OpenAPI document shows: the same object, not a copy', () => {
    expect(openApiDocument.components.schemas).toBe(componentSchemas);
    expect(componentSchemas.TemplateInput).toBe(TemplateInput);
    expect(componentSchemas.LoginRequest).toBe(LoginRequest);
    expect(componentSchemas.DiagnosticsRequest).toBe(DiagnosticsRequest);
  });

  it('serves as JSON Schema without TypeBox metadata', () => {
    const served = JSON.parse(JSON.stringify(openApiDocument)) as typeof openApiDocument;
    expect(served.components.schemas.ScopesInput).toEqual(JSON.parse(JSON.stringify(ScopesInput)));
    expect(JSON.stringify(served)).not.toContain('TypeBox');
  });

  it('takes the decision step codes from the one list in src/authz/decision.ts', () => {
    expect(componentSchemas.DecisionStep.properties.code.enum).toEqual([...PASSED_STEP_CODES, ...FAILED_STEP_CODES]);
    expect(componentSchemas.Problem.properties.step.enum).toEqual([...FAILED_STEP_CODES]);
  });

  it('validates request bodies with the documented schema: 400 naming each pointer', () => {
    const ajv = createBodyValidator();
    const login = ajv.compile(loginRequest(['WEB', 'API']));
    expect(assertValid(login, { username: 'u', password: 'p', clientType: 'WEB' })).toEqual({ username: 'u', password: 'p', clientType: 'WEB' });
    const problem = (() => {
      try {
        assertValid(login, { username: '', password: 'p', clientType: 'TV', extra: 1 });
      } catch (error) {
        return error as ProblemError;
      }
      throw new Error('accepted');
    })();
    expect(problem).toBeInstanceOf(ProblemError);
    expect(problem.code).toBe('IAM_VALIDATION_FAILED');
    expect(problem.toBody('/iam/auth/login', 'r').errors).toEqual([
      { pointer: '/extra', message: 'is not an allowed property' },
      { pointer: '/username', message: 'must NOT have fewer than 1 characters' },
      { pointer: '/clientType', message: 'must be one of WEB, API' },
    ]);
    const diagnostics = ajv.compile(DiagnosticsRequest);
    expect(diagnostics({ method: 'GET', path: '/x' })).toBe(true);
    expect(diagnostics({ permissionCode: 'a:b', resourceType: 'T' })).toBe(false);
    expect(diagnostics({ permissionCode: 'a:b', resourceType: 'T', resourceId: '1' })).toBe(true);
  });
});
