// /iam/console/policy: the routes the gateway enforces (GET /iam/admin/policy), the last failed reload, the candidate
// policy with its divergences per route, and a coverage check of a host OpenAPI document (POST
// /iam/admin/policy/coverage).
import { api, query } from './api.js';
import { badge, facts, field, h, replace, table, when } from './dom.js';
import { problemView } from './problems.js';
import { announce } from './status.js';

const NEEDS = 'iam.admin.policy:read';

/** `file:line`, or the file alone, or nothing. */
const source = (file, line) => (file ? `${file}${line ? `:${line}` : ''}` : '');

/** The cells of one route, as text first (for the filter) and as nodes. */
function routeCells(route) {
  const permission = route.public ? 'public' : (route.permission ?? 'none (any signed-in user)');
  const resource = route.resource ? `${route.resource.type}:${route.resource.idParam} ${route.resource.access}${route.resource.resolve ? ` (resolve ${route.resource.resolve})` : ''}` : '';
  const text = [route.methods.join(' '), route.pattern, permission, route.profile === 'optional' ? 'profile optional' : '', resource, route.mode, source(route.file, route.line)].join(' ').toLowerCase();
  const cells = [
    route.methods.join(', '),
    h('code', null, route.pattern),
    route.public ? badge('public', 'neutral') : route.permission ? [h('code', null, route.permission), route.profile === 'optional' ? ' (profile optional)' : ''] : 'none (any signed-in user)',
    resource ? h('code', null, resource) : '—',
    route.mode === 'shadow' ? badge('shadow', 'warn') : 'enforce',
    h('code', null, source(route.file, route.line)),
  ];
  return { text, cells };
}

export async function renderPolicy({ root, heading, isCurrent }) {
  heading('Policy');
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  root.append(body);
  let policy;
  try {
    policy = (await api('/iam/admin/policy')).data;
  } catch (error) {
    if (isCurrent()) replace(body, problemView(error, { action: 'see the policy', permission: NEEDS }));
    return;
  }
  if (!isCurrent()) return;

  const errorBox = policy.lastError
    ? h(
        'section',
        { class: 'error-box', 'aria-labelledby': 'reload-error-heading' },
        h('h2', { id: 'reload-error-heading' }, 'The last policy reload failed'),
        h('p', null, 'At ', when(policy.lastError.at), '. The gateway keeps serving the policy below (the last good one) until the files are fixed.'),
        h(
          'ul',
          { class: 'issues' },
          policy.lastError.issues.map((issue) =>
            h('li', null, h('code', null, source(issue.file, issue.line) || '(policy)'), ': ', issue.message, issue.severity && issue.severity !== 'error' ? ` (${issue.severity})` : ''),
          ),
        ),
      )
    : null;

  const rows = policy.routes.map((route) => ({ route, ...routeCells(route) }));
  const filterInput = h('input', { type: 'search', name: 'filter', autocomplete: 'off', spellcheck: 'false' });
  const count = h('p', { class: 'muted' });
  const tableHolder = h('div');
  const showRows = () => {
    const needle = filterInput.value.trim().toLowerCase();
    const shown = rows.filter((row) => needle === '' || row.text.includes(needle));
    replace(tableHolder, table('Policy routes', ['Methods', 'Pattern', 'Permission', 'Resource', 'Mode', 'Source'], shown.map((row) => row.cells)));
    count.textContent = needle === '' ? `${rows.length} routes.` : `${shown.length} of ${rows.length} routes match "${filterInput.value.trim()}".`;
    return count.textContent;
  };
  let filterTimer = null;
  filterInput.addEventListener('input', () => {
    const text = showRows();
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => announce(text), 400);
  });
  showRows();

  replace(
    body,
    errorBox,
    facts([
      ['Hash', h('code', null, policy.hash)],
      ['Loaded', when(policy.loadedAt)],
      ['Files', policy.files.length > 0 ? policy.files.map((file, index) => [index > 0 ? ', ' : '', h('code', null, file)]) : 'none'],
      ['Unmatched requests', policy.defaultAction === 'allow' ? badge('allowed (default: allow)', 'warn') : 'denied (default: deny)'],
    ]),
    candidateSection(policy.candidate),
    h(
      'section',
      { 'aria-labelledby': 'routes-heading' },
      h('h2', { id: 'routes-heading' }, 'Routes'),
      field('Filter routes', filterInput, 'Matches any column: method, pattern, permission, resource, mode, file.'),
      count,
      tableHolder,
    ),
    coverageSection(),
  );
  if (policy.lastError) announce('The last policy reload failed.');
}

/** The candidate's divergence counts of one route, as one sentence. */
const counts = (route) => `${route.allowToDeny} allow → deny, ${route.denyToAllow} deny → allow${route.unknown > 0 ? `, ${route.unknown} unknown` : ''}`;

/** What the candidate decided for an example: `deny (SCOPE_DENIED)`, `allow`, `unknown`. */
const verdict = (outcome) => `${outcome.decision}${outcome.step ? ` (${outcome.step})` : ''}`;

/**
 * One example as a link to Explain: the request explained for its user (as the live policy decides it now), or, for
 * an anonymous request the live policy denied, its recorded decision; an anonymous allowed request has nothing to show.
 */
function exampleLink(example) {
  const text = `${example.method} ${example.path}${example.userId ? ` (${example.userId})` : ''}`;
  const describe = `: live ${example.live.decision}${example.live.step ? ` (${example.live.step})` : ''}, candidate ${verdict(example.candidate)}, `;
  const href = example.userId
    ? `/iam/console/explain${query({ method: example.method, path: example.path, userId: example.userId })}`
    : example.live.decision === 'deny'
      ? `/iam/console/explain${query({ decisionId: example.live.decisionId })}`
      : null;
  return h('li', null, href ? h('a', { href }, text) : h('code', null, text), describe, when(example.at));
}

/**
 * The candidate policy (`iam.policy.candidate-dir`): where it is read from, what is loaded, its last failed load, and
 * the requests it decided otherwise than the live policy, per candidate route with recent examples. Nothing when no
 * candidate is configured.
 */
function candidateSection(candidate) {
  if (!candidate) return null;
  const loaded = candidate.loaded;
  const failure = candidate.lastError
    ? h(
        'div',
        { class: 'error-box' },
        h('h3', null, loaded ? 'The last candidate load failed; the last good candidate keeps deciding' : 'The candidate could not be loaded'),
        h('p', null, 'At ', when(candidate.lastError.at), '. A candidate is never enforced: live traffic is not affected.'),
        h(
          'ul',
          { class: 'issues' },
          candidate.lastError.issues.map((issue) => h('li', null, h('code', null, source(issue.file, issue.line) || '(candidate)'), ': ', issue.message)),
        ),
      )
    : null;
  const divergences = candidate.divergences;
  let body;
  if (!loaded || !divergences) {
    body = h('p', null, 'No candidate is deciding.');
  } else if (divergences.total === 0) {
    body = h('p', { class: 'summary' }, 'No divergence since ', when(divergences.since), ': the candidate decided every request as the live policy did.');
  } else {
    const rows = divergences.routes.map((route) => [
      route.route ? h('code', null, route.route) : 'no route (its default)',
      route.routeId ? h('code', null, route.routeId) : '—',
      counts(route),
      when(route.lastAt),
      h('ul', { class: 'examples' }, route.examples.slice(0, 3).map(exampleLink)),
    ]);
    body = [
      h('p', { class: 'summary' }, `${divergences.total} ${divergences.total === 1 ? 'request' : 'requests'} decided otherwise since `, when(divergences.since), divergences.otherRoutes > 0 ? ` (${divergences.otherRoutes} on routes not listed)` : '', '.'),
      table('Candidate divergences', ['Candidate route', 'Source', 'Divergences', 'Latest', 'Recent examples'], rows),
    ];
  }
  return h(
    'section',
    { 'aria-labelledby': 'candidate-heading' },
    h('h2', { id: 'candidate-heading' }, 'Candidate policy'),
    h('p', null, 'Read from ', h('code', null, candidate.dir), '. It decides every proxied and forward-auth request beside the live policy and is never enforced (this instance\'s counts).'),
    loaded
      ? facts([
          ['Hash', h('code', null, loaded.hash)],
          ['Loaded', when(loaded.loadedAt)],
          ['Routes', String(loaded.routes)],
        ])
      : null,
    failure,
    body,
  );
}

/**
 * A JSON document is sent re-serialized without whitespace: the same document in fewer bytes (the /iam body limit),
 * and its line breaks, which every /iam body refuses as control characters, are gone. YAML is sent as it is.
 */
function compact(text) {
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return text;
  }
}

/** Upload or paste a host OpenAPI document; the answer lists the operations no route covers, and unused routes. */
function coverageSection() {
  const fileInput = h('input', { type: 'file', name: 'document-file', accept: '.json,.yaml,.yml' });
  const textInput = h('textarea', { name: 'document', rows: '6', spellcheck: 'false', class: 'wide' });
  const result = h('div');
  const form = h(
    'form',
    { class: 'card', novalidate: true },
    field('OpenAPI document file (JSON or YAML)', fileInput),
    field('Or paste the document', textInput),
    h('button', { type: 'submit' }, 'Check coverage'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const submit = form.querySelector('button[type=submit]');
    const file = fileInput.files && fileInput.files[0];
    const text = compact(file ? await file.text() : textInput.value);
    if (text.trim() === '') {
      replace(result, h('p', { class: 'problem' }, 'Choose a file or paste a document first.'));
      announce('Choose a file or paste a document first.');
      return;
    }
    submit.disabled = true;
    replace(result, h('p', { class: 'muted' }, 'Checking…'));
    try {
      const { data } = await api('/iam/admin/policy/coverage', { method: 'POST', body: { document: text } });
      const summary = `${data.operations} operations; ${data.uncovered.length} not covered by any route; ${data.unusedRoutes.length} routes match no operation.`;
      replace(
        result,
        h('p', { class: 'summary' }, summary),
        h('h3', null, 'Operations no route covers'),
        data.uncovered.length === 0
          ? h('p', null, 'None: every operation has a route.')
          : table('Uncovered operations', ['Method', 'Path'], data.uncovered.map((op) => [op.method, h('code', null, op.path)])),
        h('h3', null, 'Routes no operation uses'),
        data.unusedRoutes.length === 0
          ? h('p', null, 'None.')
          : table('Unused routes', ['Methods', 'Pattern', 'Source'], data.unusedRoutes.map((route) => [route.methods.join(', '), h('code', null, route.pattern), h('code', null, source(route.file, route.line))])),
      );
      announce(summary);
    } catch (error) {
      replace(result, problemView(error, { action: 'check coverage', permission: NEEDS }));
    } finally {
      submit.disabled = false;
    }
  });
  return h('section', { 'aria-labelledby': 'coverage-heading' }, h('h2', { id: 'coverage-heading' }, 'Coverage of a host API'), form, result);
}
