import { Migration } from '@mikro-orm/migrations';

/**
 * OpenID Connect RP-initiated logout (docs/oidc.md): a session opened by an OpenID Connect login keeps the provider's
 * ID token, sent back to the provider as `id_token_hint` when the user signs out (many providers require it to end
 * their own session without asking). Kept server side only: never in a session listing, never sent to the host.
 */
export class Migration20261202000002_session_idp_id_token extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "iam_sessions" add column "idp_id_token" text null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "iam_sessions" drop column if exists "idp_id_token";`);
  }
}
