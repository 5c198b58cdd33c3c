/** Result of normalizing a request target once, before matching (docs/http-contract.md). */
export type NormalizedTarget =
  | {
      ok: true;
      /** The normalized path: the matcher and the host see exactly this. Always starts with `/`. */
      path: string;
      /** The original query including its leading `?`, or '' when none; forwarded unchanged. */
      search: string;
    }
  | {
      ok: false;
      /** Why the target was refused (safe to show the client). */
      reason: string;
    };

export interface NormalizeOptions {
  /** `iam.gateway.allow-path-parameters`: accept `;` in path segments (refused by default). */
  allowPathParameters: boolean;
  /** The request's Host header, to accept absolute-form targets naming this same host. */
  host: string | undefined;
  /** Upper bound on the target length (414 above it is the caller's job; this refuses above it). */
  maxLength?: number;
}
