const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text or attribute value → HTML that shows it literally (element content and double- or single-quoted attributes). */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (char) => ESCAPES[char]!);

/**
 * Headers of every HTML page the gateway writes itself (the 403 page, the login form): never cached, never framed
 * (clickjacking), never sniffed as something else, and no referrer that could carry a `returnTo` elsewhere.
 */
export function htmlPageHeaders(csp: string): Record<string, string> {
  return {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'content-security-policy': csp,
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'same-origin',
  };
}
