#!/usr/bin/env node
'use strict';
/**
 * `npm run docs:endpoints`: rewrites the generated endpoint table of docs/endpoints.md (between its markers) from the
 * route declarations, through the OpenAPI document they generate (src/api/endpoints-reference.ts).
 * `--check` only reports whether the table is current (exit 1 when not).
 */
const { rewriteGeneratedBlock } = require('./lib/generated-block');

rewriteGeneratedBlock({
  command: 'docs:endpoints',
  page: 'docs/endpoints.md',
  module: 'src/api/endpoints-reference.js',
  from: (built) => ({ begin: built.ENDPOINTS_REFERENCE_BEGIN, end: built.ENDPOINTS_REFERENCE_END, render: built.renderEndpointsReference }),
  what: 'docs/endpoints.md',
});
