/** What the rest of the code may use from config/: load once at start, pass the result down. */
export { loadConfig, ConfigError, type ConfigProblem, type LoadConfigOptions } from './load-config';
export type { GatewayConfig } from './gateway-config';
export { parseDuration, parseByteSize, tryParseDuration, DURATION_EXAMPLES } from './durations';
export { listConfigKeys, type ConfigKey } from './config-schema';
export { renderConfigReference, CONFIG_REFERENCE_BEGIN, CONFIG_REFERENCE_END } from './config-reference';
export { packageRoot } from './package-root';
