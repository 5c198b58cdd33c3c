import pino, { type Logger } from 'pino';
import { redactingLoggerOptions } from './redaction';

export type { Logger } from 'pino';

/**
 * The gateway's structured logger. Every line goes through the one redaction layer (redaction.ts): credentials by
 * property name and by shape, in the message, in any field and in errors (a Redis error's `command.args`, a URL's
 * userinfo), so no call site has to take care.
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino({ level, base: { service: 'iam-gateway' }, ...redactingLoggerOptions }, destination);
}
