import type { TypedConfig } from './config-schema';

/**
 * The validated configuration, as the code sees it: YAML keys in camelCase, durations in milliseconds (`…Ms`),
 * sizes in bytes, paths absolute, unset values null. Every property but `source` and `warnings` is read off the
 * key's declaration in config-schema.ts (its typed form: key-forms.ts), never written here. The YAML/env form
 * (kebab-case keys, `8h`, `1mb`) is documented in config/default.yaml.
 */
export interface GatewayConfig extends TypedConfig {
  /** Absolute path of the file the configuration came from (for resolving relative paths). */
  source: {
    file: string;
    directory: string;
    /** `iam.policy.dir` is the package's own example policy: `serve` found no policy of the operator's (load-config.ts). */
    packagedPolicy: boolean;
  };
  /**
   * What loading noticed without refusing it: one line per `IAM_…` or `SERVER_…` environment variable that no key
   * reads (`unknown environment variable IAM_POLICY_DIRR (did you mean IAM_POLICY_DIR?)`), logged as warnings at start.
   */
  warnings: string[];
}
