/**
 * A real browser for end-to-end tests: Debian's Chromium (`apt-get install chromium`) driven by playwright-core
 * (which downloads no browser of its own). Tests that need it run where it is installed and always in CI:
 *
 *   const runnable = chromiumAvailable();
 *   if (!runnable) notRun('my-file: browser tests (no /usr/bin/chromium; CI always has it)');
 *   const testInBrowser = runnable ? test : test.skip;
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** Whether Chromium is installed here. */
export const hasChromium = (): boolean => existsSync(CHROMIUM);

/** True when Chromium is there, and always in CI (where a missing browser must fail, not skip). */
export const chromiumAvailable = (): boolean => hasChromium() || process.env.CI !== undefined;

/** Launches headless Chromium; close it in afterAll (`await browser.close()`). */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // --no-sandbox: tests may run as root in a container; the rest keep Chromium quiet and small.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking', '--no-first-run'],
  });
}
