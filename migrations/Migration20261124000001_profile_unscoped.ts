import { Migration } from '@mikro-orm/migrations';

/**
 * docs/threat-model.md #11.31: whether a profile applies to every resource becomes an explicit column instead of "has no
 * scopes", so removing the last scope can no longer widen a profile to every resource. Existing rows keep
 * what they granted: a profile without scopes was unscoped (every resource) and stays so; a profile with
 * scopes is scoped. From now on a scoped profile that loses its last scope grants no resource at all.
 */
export class Migration20261124000001_profile_unscoped extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "iam_profiles" add column "unscoped" boolean not null default false;`);
    this.addSql(
      `update "iam_profiles" p set "unscoped" = true where not exists (select 1 from "iam_resource_scopes" s where s."profile_id" = p."profile_id");`,
    );
  }

  /** Rolling back loses the distinction: a scoped profile without scopes becomes unscoped again, so refuse then. */
  override async down(): Promise<void> {
    this.addSql(`do $$ begin
      if exists (select 1 from "iam_profiles" p where not p."unscoped" and not exists (select 1 from "iam_resource_scopes" s where s."profile_id" = p."profile_id")) then
        raise exception 'iam_profiles has scoped profiles without scopes; rolling back would make them unscoped (every resource)';
      end if;
    end $$;`);
    this.addSql(`alter table "iam_profiles" drop column "unscoped";`);
  }
}
