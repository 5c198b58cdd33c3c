/** `iam-gateway policy …` in process: its exit code and what it wrote to stdout and stderr. */
import { Writable } from 'node:stream';
import { runPolicyCommand } from '../../src/cli/policy-command';

function sink(): { stream: Writable; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return { stream, text: () => text };
}

export async function runPolicy(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = sink();
  const stderr = sink();
  const code = await runPolicyCommand(args, { stdout: stdout.stream, stderr: stderr.stream, env, cwd });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

export function runPolicyCheck(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return runPolicy(['check', ...args], cwd, env);
}
