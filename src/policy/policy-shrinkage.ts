import type { CompiledPolicy } from './compiled-policy';

/** A file a reload took routes or most of its bytes from (or removed), compared with the policy it replaced. */
export interface ShrunkFile {
  file: string;
  routesBefore: number;
  routesAfter: number;
  /** Sizes as read, when both policies know them. */
  bytesBefore: number | null;
  bytesAfter: number | null;
}

/**
 * The files of `after` that lost routes, or shrank to less than half their size, against `before` — the marks of a
 * file caught half-written (an editor or a deploy writing in steps instead of renaming into place) or of an edit
 * that removed more than meant. A valid policy is still served (it is valid); the reload log says so loudly, so an
 * operator notices before a user does. Files removed entirely count with `routesAfter` 0 and `bytesAfter` 0.
 */
export function shrunkFiles(before: CompiledPolicy, after: CompiledPolicy): ShrunkFile[] {
  const count = (policy: CompiledPolicy): Map<string, number> => {
    const routes = new Map<string, number>(policy.files.map((file) => [file, 0]));
    for (const route of policy.routes) routes.set(route.source.file, (routes.get(route.source.file) ?? 0) + 1);
    return routes;
  };
  const routesBefore = count(before);
  const routesAfter = count(after);
  const shrunk: ShrunkFile[] = [];
  for (const [file, was] of routesBefore) {
    const now = routesAfter.get(file);
    const bytesBefore = before.fileBytes?.[file] ?? null;
    const bytesAfter = now === undefined ? 0 : (after.fileBytes?.[file] ?? null);
    const lostRoutes = (now ?? 0) < was;
    const halved = bytesBefore !== null && bytesAfter !== null && bytesAfter * 2 < bytesBefore;
    if (lostRoutes || halved || now === undefined) shrunk.push({ file, routesBefore: was, routesAfter: now ?? 0, bytesBefore, bytesAfter });
  }
  return shrunk;
}
