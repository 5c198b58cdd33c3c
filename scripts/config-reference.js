#!/usr/bin/env node
'use strict';
/**
 * `npm run docs:config`: rewrites the generated table of docs/configuration.md ("Every key", between its BEGIN and END
 * markers) from the configuration schema (src/config/config-schema.ts: each key's default and description).
 * `--check` only reports whether the table is current (exit 1 when not).
 */
const { rewriteGeneratedBlock } = require('./lib/generated-block');

rewriteGeneratedBlock({
  command: 'docs:config',
  page: 'docs/configuration.md',
  module: 'src/config/index.js',
  from: (built) => ({ begin: built.CONFIG_REFERENCE_BEGIN, end: built.CONFIG_REFERENCE_END, render: built.renderConfigReference }),
  what: 'the "Every key" table of docs/configuration.md',
});
