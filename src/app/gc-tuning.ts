import { setFlagsFromString } from 'node:v8';

/** The node option that keeps V8's allocation-site pretenuring on (V8's default) where the gateway turns it off. */
export const KEEP_PRETENURING_OPTION = '--allocation-site-pretenuring';

/**
 * Turns V8's allocation-site pretenuring off for this process, unless node was started with
 * {@link KEEP_PRETENURING_OPTION}. Called first by every entry that runs the gateway (bin/iam-gateway.js, its
 * `--workers` children through the same script, `npm run demo`), before the gateway's code allocates anything.
 *
 * Pretenuring decides per allocation site, from what survived the young-generation collections (scavenges) so
 * far, to allocate the site's objects in the old generation, and keeps that decision for the life of the process.
 * Under load it can pick a site whose objects belong to one request; from then on everything young they point to
 * survives each scavenge. Measured (`npm run bench -- --gc`, in-process token store): 7.2 KB promoted and 25–29 µs
 * of scavenge per request in the processes it happened to, against about 120 bytes and 3 µs with it off, and 36%
 * less CPU per request at the median. The gateway's long-lived data (policy, caches) is built once or kept in
 * Maps, so it loses nothing that pretenuring would have given it.
 *
 * Returns whether it turned pretenuring off.
 */
export function turnOffPretenuring(execArgv: readonly string[] = process.execArgv): boolean {
  if (execArgv.includes(KEEP_PRETENURING_OPTION)) return false;
  setFlagsFromString('--no-allocation-site-pretenuring');
  return true;
}
