import type { YAMLError } from 'yaml';

/**
 * How many YAML errors a reader reports for one file: the first, and at most three after it. One slip (a tab, a
 * missing space after a colon, a missing `:`) makes the `yaml` library report every line after it as well — 85 to
 * 379 errors for one character in the example files — and the one that matters scrolls away.
 */
export const MAX_YAML_ERRORS = 4;

/** One YAML error as a reader reports it. */
export interface YamlErrorReport {
  /** 1-based. */
  line: number;
  /** 1-based. */
  column: number;
  /** What is wrong, one line, ending with `at line L, column C`; the last one reported also says how many were left out. */
  message: string;
}

/** `key:value` at the start of a line: a key whose colon has no space after it, which YAML reads as one plain text. */
const COLON_WITHOUT_SPACE = /^([ \t]*)([A-Za-z_][\w.-]*):(?=[^\s:/])(\S*)/;

/** A word alone on a line, followed by an indented block: a key that lost its colon. */
const BARE_KEY = /^([ \t]*)([A-Za-z_][\w.-]*)[ \t]*$/;

/**
 * The errors of one parsed YAML text as a reader reports them: in file order, the first and at most three more
 * ({@link MAX_YAML_ERRORS}); the last one reported says how many more there were.
 *
 * The `yaml` library reports a missing space after a colon (`port:8080`) or a key that lost its colon (`templates`)
 * only where the lines after it stop making sense. When the line of content before the first error has that shape,
 * it is reported first, as the likely cause.
 */
export function yamlErrorReports(text: string, errors: readonly YAMLError[]): YamlErrorReport[] {
  const ordered = [...errors].sort((a, b) => a.pos[0] - b.pos[0]);
  const reports: YamlErrorReport[] = ordered.map((error) => {
    const line = error.linePos?.[0].line ?? 1;
    const column = error.linePos?.[0].col ?? 1;
    const what = (error.message.split('\n', 1)[0] ?? error.message).replace(/ at line \d+, column \d+:?$/, '').replace(/:$/, '');
    return { line, column, message: `${what} at line ${line}, column ${column}` };
  });
  const cause = reports.length === 0 ? null : colonWithoutSpace(text, reports[0]!.line);
  if (cause !== null) reports.unshift(cause);
  const shown = reports.slice(0, MAX_YAML_ERRORS);
  const omitted = reports.length - shown.length;
  if (omitted > 0) {
    const last = shown[shown.length - 1]!;
    shown[shown.length - 1] = { ...last, message: `${last.message} (and ${omitted} more YAML error${omitted === 1 ? '' : 's'} after it, most likely caused by the first)` };
  }
  return shown;
}

/**
 * The likely cause of an error at `errorLine`: that line, or the line of content (not a comment) before it, holding
 * `key:value`; or that line before it holding a key without its colon.
 */
function colonWithoutSpace(text: string, errorLine: number): YamlErrorReport | null {
  const lines = text.split('\n');
  const own = COLON_WITHOUT_SPACE.exec(lines[errorLine - 1] ?? '');
  if (own !== null) return colonReport(own, errorLine);
  for (let index = Math.min(errorLine, lines.length) - 2; index >= 0; index--) {
    const content = lines[index]!;
    if (/^\s*(#|$)/.test(content)) continue;
    const line = index + 1;
    const bare = BARE_KEY.exec(content);
    if (bare !== null) {
      const column = bare[1]!.length + bare[2]!.length + 1;
      return { line, column, message: `"${bare[2]}" alone on its line: a key without its colon? (write "${bare[2]}:") at line ${line}, column ${column}` };
    }
    const match = COLON_WITHOUT_SPACE.exec(content);
    return match === null ? null : colonReport(match, line);
  }
  return null;
}

function colonReport(match: RegExpExecArray, line: number): YamlErrorReport {
  const column = match[1]!.length + match[2]!.length + 2;
  return { line, column, message: `no space after the colon of "${match[2]}:${match[3]}" (YAML reads it as one text, not a key and its value; write "${match[2]}: ${match[3]}") at line ${line}, column ${column}` };
}
