import pino, { type Logger } from 'pino';

export type { Logger } from 'pino';

/**
 * The gateway's structured logger. Tokens and passwords never reach it: the redact list is a second line
 * of defence for the fields where a careless log call could put them.
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'iam-gateway' },
      redact: {
        paths: ['password', '*.password', 'accessToken', '*.accessToken', 'authorization', '*.authorization', 'headers.authorization'],
        censor: '[redacted]',
      },
    },
    destination,
  );
}
