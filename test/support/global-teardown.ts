export default async function globalTeardown(): Promise<void> {
  await globalThis.__IAM_EMBEDDED_DB__?.stop();
}
