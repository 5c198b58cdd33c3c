import { Migration } from '@mikro-orm/migrations';

/**
 * The initial `iam_` schema. Written by hand rather than generated, so the SQL that runs in
 * production is the SQL that was reviewed. Identifiers are text chosen by the host or admin (never
 * renumbered); only audit events get a database-assigned id.
 */
export class Migration20261122000001_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "iam_users" (
      "user_id" text not null primary key,
      "display_name" text null,
      "enabled" boolean not null default true,
      "authorization_version" integer not null default 0,
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now(),
      "version" integer not null default 1
    );`);

    this.addSql(`create table "iam_identities" (
      "identity_id" text not null primary key,
      "user_id" text not null references "iam_users" ("user_id"),
      "identity_domain" text not null,
      "enabled" boolean not null default true,
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now()
    );`);
    this.addSql(`create index "iam_identities_user_id_index" on "iam_identities" ("user_id");`);

    this.addSql(`create table "iam_permission_templates" (
      "version_id" text not null primary key,
      "name" text not null,
      "description" text null,
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now(),
      "version" integer not null default 1
    );`);

    this.addSql(`create table "iam_template_permissions" (
      "version_id" text not null references "iam_permission_templates" ("version_id") on delete cascade,
      "permission_code" text not null,
      primary key ("version_id", "permission_code")
    );`);

    this.addSql(`create table "iam_profiles" (
      "profile_id" text not null primary key,
      "user_id" text not null references "iam_users" ("user_id"),
      "profile_name" text not null,
      "template_version_id" text not null references "iam_permission_templates" ("version_id"),
      "client_types" text[] not null default '{}',
      "enabled" boolean not null default true,
      "revoked" boolean not null default false,
      "version" integer not null default 1,
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now()
    );`);
    this.addSql(`create index "iam_profiles_user_id_index" on "iam_profiles" ("user_id");`);
    this.addSql(`create index "iam_profiles_template_version_id_index" on "iam_profiles" ("template_version_id");`);

    // The primary key is the uniqueness rule unique(profile_id, scope_type, scope_ref_id).
    this.addSql(`create table "iam_resource_scopes" (
      "profile_id" text not null references "iam_profiles" ("profile_id") on delete cascade,
      "scope_type" text not null,
      "scope_ref_id" text not null,
      "access_mode" text not null check ("access_mode" in ('READ', 'WRITE')),
      primary key ("profile_id", "scope_type", "scope_ref_id")
    );`);

    this.addSql(`create table "iam_sessions" (
      "session_id" text not null primary key,
      "user_id" text not null references "iam_users" ("user_id"),
      "identity_id" text not null,
      "client_type" text not null,
      "active_profile_id" text null,
      "token_hash" text not null,
      "created_at" timestamptz not null,
      "expires_at" timestamptz not null,
      "last_seen_at" timestamptz null,
      "revoked_at" timestamptz null,
      "logout_at" timestamptz null,
      "revoke_reason" text null,
      "client_address" text null,
      "user_agent" text null,
      constraint "iam_sessions_token_hash_unique" unique ("token_hash")
    );`);
    this.addSql(`create index "iam_sessions_user_id_index" on "iam_sessions" ("user_id");`);

    // No foreign key on actor_user_id: the trail also records failed logins of unknown users.
    this.addSql(`create table "iam_audit_events" (
      "id" bigserial primary key,
      "occurred_at" timestamptz not null,
      "actor_user_id" text null,
      "action" text not null,
      "target_type" text null,
      "target_id" text null,
      "outcome" text not null check ("outcome" in ('success', 'failure', 'denied', 'shadow_denied')),
      "request_id" text null,
      "decision_id" text null,
      "client_address" text null,
      "details" jsonb null
    );`);
    this.addSql(`create index "iam_audit_events_occurred_at_index" on "iam_audit_events" ("occurred_at");`);
    this.addSql(`create index "iam_audit_events_actor_user_id_index" on "iam_audit_events" ("actor_user_id");`);
    this.addSql(`create index "iam_audit_events_decision_id_index" on "iam_audit_events" ("decision_id");`);
    this.addSql(`create index "iam_audit_events_action_index" on "iam_audit_events" ("action");`);
  }

  override async down(): Promise<void> {
    // Reverse creation order, so no table is dropped while another still references it.
    this.addSql(`drop table if exists "iam_audit_events";`);
    this.addSql(`drop table if exists "iam_sessions";`);
    this.addSql(`drop table if exists "iam_resource_scopes";`);
    this.addSql(`drop table if exists "iam_profiles";`);
    this.addSql(`drop table if exists "iam_template_permissions";`);
    this.addSql(`drop table if exists "iam_permission_templates";`);
    this.addSql(`drop table if exists "iam_identities";`);
    this.addSql(`drop table if exists "iam_users";`);
  }
}
