import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import type { PendingLogin } from './relying-party';

/** What the browser carries between the redirect to the provider and the callback (sealed, see {@link LoginStateSeal}). */
export interface LoginState extends PendingLogin {
  /** Where to go after the login (already checked: a same-origin relative path). */
  returnTo: string;
  /** Epoch ms after which the callback is refused. */
  expiresAtMs: number;
}

/** A login must come back from the provider within this. */
export const LOGIN_STATE_TTL_MS = 10 * 60_000;

const VERSION = 'v1';

/**
 * Seals the pending login into the `iam-oidc` cookie with AES-256-GCM: the browser can neither read the PKCE
 * verifier nor change `state`, `nonce` or `returnTo`. The key is derived (HKDF-SHA256) from the client secret, which
 * every instance of the gateway has, so any instance can finish a login another one began; a changed secret just
 * fails the logins in flight. The cookie also binds the callback to the browser that started the login (login CSRF).
 */
export class LoginStateSeal {
  private readonly key: Buffer;

  constructor(clientSecret: string) {
    this.key = Buffer.from(hkdfSync('sha256', clientSecret, 'iam-gateway', 'oidc login state cookie v1', 32));
  }

  seal(state: LoginState): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(VERSION));
    const body = Buffer.concat([cipher.update(JSON.stringify(state), 'utf8'), cipher.final()]);
    return [VERSION, iv.toString('base64url'), body.toString('base64url'), cipher.getAuthTag().toString('base64url')].join('.');
  }

  /** The state sealed in `value`, or null when it is missing, tampered with, malformed or expired. */
  unseal(value: string | null | undefined, nowMs = Date.now()): LoginState | null {
    if (!value || value.length > 4096) return null;
    const [version, iv, body, tag, ...rest] = value.split('.');
    if (version !== VERSION || !iv || !body || !tag || rest.length > 0) return null;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
      decipher.setAAD(Buffer.from(VERSION));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      const json = Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
      const state = JSON.parse(json) as Partial<LoginState>;
      const fields = [state.state, state.nonce, state.codeVerifier, state.returnTo];
      if (fields.some((field) => typeof field !== 'string') || typeof state.expiresAtMs !== 'number') return null;
      if (state.expiresAtMs <= nowMs) return null;
      return state as LoginState;
    } catch {
      return null;
    }
  }
}
