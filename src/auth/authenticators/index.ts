/** The login methods (`iam.authenticator.type`): their registry and what is derived from it. */
export { AUTHENTICATORS, type AuthenticatorRegistry, type AuthenticatorType, type AuthenticatorConfig, type IdentityAuthenticator } from './registry';
export { authenticatorKeys, type RegisteredKey } from './registry-keys';
export { createAuthenticator, keyForLoadErrors, registrationOf, type AuthenticatorSection } from './create-authenticator';
export {
  defineAuthenticator,
  typedNameOf,
  type AnyAuthenticatorRegistration,
  type AuthenticatorDeps,
  type AuthenticatorKey,
  type AuthenticatorKeyForm,
  type AuthenticatorKeySchema,
  type AuthenticatorRegistration,
} from './authenticator-registration';
