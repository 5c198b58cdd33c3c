import { readFileSync } from 'node:fs';
import { hashPassword } from '../auth/password-hash';
import { parseCommandLine, type CliCommand } from './command-line';

const USAGE = `usage: iam-gateway hash-password [PASSWORD]

Prints an argon2id hash of PASSWORD for a users file (iam.authenticator.type: users-file).
Without PASSWORD it reads one line from standard input, which keeps the password out of the shell history:
  printf '%s' 'secret' | npx --no-install iam-gateway hash-password
A password that starts with "-" goes after "--":  npx --no-install iam-gateway hash-password -- '-secret'`;

/** `iam-gateway hash-password [PASSWORD]`. */
export const hashPasswordCommand: CliCommand = {
  usage: USAGE,
  async run(args, { stdout }) {
    const { positionals } = parseCommandLine(args, USAGE, {}, 1);
    const password = positionals[0] ?? readFileSync(0, 'utf8').replace(/\r?\n$/, '');
    stdout.write(`${await hashPassword(password)}\n`);
    return 0;
  },
};
