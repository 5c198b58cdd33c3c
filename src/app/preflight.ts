import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadProvisioningFile, ProvisioningFileError, type ProvisioningFile } from '../auth/provisioning-file';
import type { Authenticator } from '../auth/authenticator';
import { AUTHENTICATORS, createAuthenticator, keyForLoadErrors, type AuthenticatorRegistry } from '../auth/authenticators';
import { AssertionSigner } from '../gateway/assertion-signer';
import { compilePageLayout, PageTemplateError, type PageBranding } from '../http/page-layout';
import { ConfigError, listConfigKeys, type ConfigProblem, type GatewayConfig } from '../config';

/** What the files named by the configuration turned into, read before anything is opened. */
export interface Preflight {
  /** `iam.forward.assertion`: the signer with its key, or null when assertions are off. */
  signer: AssertionSigner | null;
  /** `iam.authenticator.*`, with its users file or module loaded. */
  authenticator: Authenticator;
  /** `iam.provision.file`, read and checked (shape, codes, client types), or null. */
  provisioning: ProvisioningFile | null;
  /** `iam.ui.*`: the title, the logo and the custom layout of `iam.ui.templates-dir` (compiled), if any. */
  branding: PageBranding;
}

/**
 * Reads and checks every file the configuration names (the assertion key, the users file or authenticator
 * module, the provisioning file) before a database, a token store or a port is opened, and reports every
 * problem at once as a ConfigError naming the key and its environment variable: a typo in a path fails the
 * start in milliseconds, not after the database came up. (The policies directory is loaded first thing too.)
 * `authenticators`: the login methods `iam.authenticator.type` chooses from (a test passes its own).
 */
export function preflight(config: GatewayConfig, authenticators: AuthenticatorRegistry = AUTHENTICATORS): Preflight {
  const problems: ConfigProblem[] = [];
  const env = new Map(listConfigKeys(authenticators).map((entry) => [entry.key, entry.env]));
  const fail = (key: string, message: string): void => void problems.push({ key, env: env.get(key), message: `${key}: ${message}` });

  let signer: AssertionSigner | null = null;
  const assertion = config.iam.forward.assertion;
  if (assertion.enabled) {
    try {
      signer = new AssertionSigner(assertion);
    } catch (error) {
      const why = /DECODER|PEM/i.test(reason(error)) ? 'it is not a PEM private key' : reason(error);
      fail('iam.forward.assertion.key-file', `cannot use ${assertion.keyFile} as the Ed25519 signing key: ${why}`);
    }
  }

  let authenticator: Authenticator | null = null;
  const auth = config.iam.authenticator;
  try {
    authenticator = createAuthenticator(auth, { maxPendingVerifications: config.iam.login.maxPendingVerifications }, authenticators);
  } catch (error) {
    fail(keyForLoadErrors(auth.type, authenticators), `cannot load the ${auth.type} authenticator: ${reason(error)}`);
  }

  let provisioning: ProvisioningFile | null = null;
  const file = config.iam.provision.file;
  if (file) {
    try {
      provisioning = loadProvisioningFile(file, { clientTypes: config.iam.clientTypes });
    } catch (error) {
      // One line per problem of the file, each with its file:line.
      const found = error instanceof ProvisioningFileError ? error.problems : [];
      if (found.length === 0) fail('iam.provision.file', reason(error));
      for (const problem of found) fail('iam.provision.file', `${file}${problem.line !== undefined ? `:${problem.line}` : ''}: ${problem.pointer} ${problem.message}`.replace(/: {2}/, ': '));
    }
  }

  const branding: PageBranding = { title: config.iam.ui.title, logoUrl: config.iam.ui.logoUrl, layout: null };
  if (config.iam.ui.templatesDir !== null) {
    const layoutFile = join(config.iam.ui.templatesDir, 'layout.html');
    try {
      branding.layout = compilePageLayout(readFileSync(layoutFile, 'utf8'), layoutFile);
    } catch (error) {
      // One line per problem of the template, each with its file:line.
      if (error instanceof PageTemplateError) for (const problem of error.problems) fail('iam.ui.templates-dir', `${error.file}:${problem.line}: ${problem.message}`);
      else fail('iam.ui.templates-dir', `cannot read ${layoutFile}: ${reason(error)}`);
    }
  }

  if (problems.length > 0) {
    void authenticator?.close?.();
    throw new ConfigError(problems, config.source.file);
  }
  return { signer, authenticator: authenticator!, provisioning, branding };
}

function reason(error: unknown): string {
  return (error as Error).message.replace(/^config: [a-z.-]+: /, '');
}
