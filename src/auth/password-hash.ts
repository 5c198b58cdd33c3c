import { hash } from '@node-rs/argon2';

/** `Algorithm.Argon2id` of @node-rs/argon2 (a const enum, which isolated modules cannot read). */
const ARGON2ID = 2;

/**
 * argon2id (RFC 9106) with OWASP's minimum parameters (m=19 MiB, t=2, p=1), on libuv's thread pool (for
 * `hash-password` and the timing-equalizer hash). Logins verify on PasswordVerifierPool's low-priority threads.
 */
export async function hashPassword(password: string): Promise<string> {
  return hash(password, { algorithm: ARGON2ID, memoryCost: 19456, timeCost: 2, parallelism: 1 });
}

let dummyHash: Promise<string> | null = null;
/**
 * A hash to verify against when the user does not exist, so that unknown users cost the same time as
 * wrong passwords (no username enumeration by timing).
 */
export function dummyPasswordHash(): Promise<string> {
  dummyHash ??= hashPassword('iam-gateway-timing-equalizer');
  return dummyHash;
}
