/**
 * Text on its way to a terminal. Much of what the commands print comes from outside: an access log's fields, a
 * path, a policy or OpenAPI file, a user id, an error quoting any of them. A terminal obeys what it is sent: ESC
 * starts a sequence that can clear the screen, retitle the window or rewrite what was already shown, BEL and the C1
 * controls (U+0080–U+009F, where U+009B is a CSI of its own) do the same, a carriage return overwrites the line,
 * and the bidirectional controls show a line in another order than it is read. Each of them is shown instead as
 * the escape JSON would write (`\u001b`, `\r`): visible, and still valid, with the same value, inside a JSON
 * string, so `--json` output goes through the same filter unchanged in meaning. A tab stays.
 */

/** Every character that steers a terminal or reorders a line, line feed included. */
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const STEERING = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
/** The same, without the line feed: for composed output whose line breaks are the writer's own. */
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const STEERING_BUT_LINE_FEED = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const SHORT: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\b': '\\b', '\f': '\\f' };

function shown(character: string): string {
  return SHORT[character] ?? `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/**
 * `text` with every control character, line separator and bidirectional control shown as its escape. `lines`:
 * `'keep'` leaves line feeds (output the command composed line by line); `'one'` escapes them too, for a value
 * from outside that must stay on the line it is printed on (a recorded path, a user id).
 */
export function terminalText(text: string, lines: 'keep' | 'one' = 'one'): string {
  return text.replace(lines === 'keep' ? STEERING_BUT_LINE_FEED : STEERING, shown);
}

/** Where a command writes text: a stream such as `process.stdout`, or a test's sink. */
export interface TextOutput {
  write(text: string): unknown;
}

/**
 * The one way the CLI writes to its standard output and error (src/cli/main.ts hands these to every command):
 * whatever a command prints, its line breaks stay and every other control character is shown escaped.
 */
export function terminalOutput(stream: TextOutput): TextOutput {
  return { write: (text) => stream.write(terminalText(text, 'keep')) };
}
