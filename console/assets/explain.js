// /iam/console/explain?decisionId=… or ?method=GET&path=/api/…[&userId=…]: why a request was (or would be) allowed
// or denied, step by step, with the policy route (file:line) that decided it. ?permission=…[&resourceType=…&resourceId=…
// &access=…][&subject=…]: a check as a host asks it (POST /iam/authorization/check), with the decision it recorded.
import { api, IDENTIFIER, query, seg } from './api.js';
import { badge, facts, field, fieldError, h, replace, when } from './dom.js';
import { problemView } from './problems.js';
import { announce } from './status.js';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
const UUID = /^[0-9a-fA-F-]{36}$/;

export async function renderExplain({ root, heading, params, navigate, isCurrent }) {
  heading('Explain a decision');
  const decisionId = params.get('decisionId') ?? '';
  const method = (params.get('method') ?? 'GET').toUpperCase();
  const path = params.get('path') ?? '';
  const userId = params.get('userId') ?? '';
  const permission = params.get('permission') ?? '';
  const resourceType = params.get('resourceType') ?? '';
  const resourceId = params.get('resourceId') ?? '';
  const access = params.get('access') === 'WRITE' ? 'WRITE' : 'READ';
  const subject = params.get('subject') ?? '';

  // By decision id.
  const idInput = h('input', { type: 'text', name: 'decisionId', value: decisionId, autocomplete: 'off', spellcheck: 'false', class: 'wide' });
  const byId = h(
    'form',
    { class: 'card', 'aria-labelledby': 'by-id-heading', novalidate: true },
    h('h2', { id: 'by-id-heading' }, 'By decision id'),
    field('Decision id', idInput, 'From a 403 page or answer, or from the audit trail.'),
    h('button', { type: 'submit' }, 'Explain decision'),
  );
  byId.addEventListener('submit', (event) => {
    event.preventDefault();
    const value = idInput.value.trim();
    if (!UUID.test(value)) {
      fieldError(idInput, 'A decision id is a UUID, e.g. 0b8f…-…');
      idInput.focus();
      return;
    }
    fieldError(idInput, null);
    navigate(`/iam/console/explain${query({ decisionId: value })}`);
  });

  // By request.
  const methodSelect = h('select', { name: 'method' }, METHODS.map((name) => h('option', { value: name, selected: name === method }, name)));
  const pathInput = h('input', { type: 'text', name: 'path', value: path, placeholder: '/api/projects/2', autocomplete: 'off', spellcheck: 'false', class: 'wide' });
  const userInput = h('input', { type: 'text', name: 'userId', value: userId, autocomplete: 'off', spellcheck: 'false' });
  const byRequest = h(
    'form',
    { class: 'card', 'aria-labelledby': 'by-request-heading', novalidate: true },
    h('h2', { id: 'by-request-heading' }, 'By request'),
    h('div', { class: 'row' }, field('Method', methodSelect), field('Path', pathInput, 'The request path (and query) as the host sees it.')),
    field('As user (optional)', userInput, "Explains as that user's default web profile; needs iam.admin.diagnostics:read. Empty: as you."),
    h('button', { type: 'submit' }, 'Explain request'),
  );
  byRequest.addEventListener('submit', (event) => {
    event.preventDefault();
    const target = pathInput.value.trim();
    const user = userInput.value.trim();
    let ok = true;
    fieldError(pathInput, null);
    fieldError(userInput, null);
    if (!target.startsWith('/')) {
      fieldError(pathInput, 'The path starts with /, e.g. /api/projects/2');
      ok = false;
    }
    if (user !== '' && !IDENTIFIER.test(user)) {
      fieldError(userInput, 'A user id is 1 to 200 visible ASCII characters, no spaces.');
      ok = false;
    }
    if (!ok) {
      (pathInput.getAttribute('aria-invalid') ? pathInput : userInput).focus();
      return;
    }
    navigate(`/iam/console/explain${query({ method: methodSelect.value, path: target, userId: user })}`);
  });

  // By permission: the check a host asks (POST /iam/authorization/check), recorded like a proxy decision.
  const permissionInput = h('input', { type: 'text', name: 'permission', value: permission, placeholder: 'project:read', autocomplete: 'off', spellcheck: 'false' });
  const typeInput = h('input', { type: 'text', name: 'resourceType', value: resourceType, placeholder: 'PROJECT', autocomplete: 'off', spellcheck: 'false' });
  const idCheckInput = h('input', { type: 'text', name: 'resourceId', value: resourceId, placeholder: '2', autocomplete: 'off', spellcheck: 'false' });
  const accessSelect = h('select', { name: 'access' }, ['READ', 'WRITE'].map((mode) => h('option', { value: mode, selected: mode === access }, mode)));
  const subjectInput = h('input', { type: 'text', name: 'subject', value: subject, autocomplete: 'off', spellcheck: 'false' });
  const byCheck = h(
    'form',
    { class: 'card', 'aria-labelledby': 'by-check-heading', novalidate: true },
    h('h2', { id: 'by-check-heading' }, 'By permission (a host\'s check)'),
    field('Permission code', permissionInput, 'resource:action, e.g. project:update.'),
    h('div', { class: 'row' }, field('Resource type (optional)', typeInput), field('Resource id', idCheckInput), field('Access', accessSelect)),
    field('For user (optional)', subjectInput, 'Decides for that user\'s default web profile; needs iam.authorization.decisions:check. Empty: for you.'),
    h('button', { type: 'submit' }, 'Run the check'),
  );
  byCheck.addEventListener('submit', (event) => {
    event.preventDefault();
    const code = permissionInput.value.trim();
    const type = typeInput.value.trim();
    const id = idCheckInput.value.trim();
    const user = subjectInput.value.trim();
    for (const input of [permissionInput, typeInput, idCheckInput, subjectInput]) fieldError(input, null);
    const problems = [];
    if (!PERMISSION_CODE.test(code)) problems.push([permissionInput, 'A permission code is resource:action, e.g. project:read.']);
    if ((type === '') !== (id === '')) problems.push([type === '' ? typeInput : idCheckInput, 'A resource needs both its type and its id.']);
    if (user !== '' && !IDENTIFIER.test(user)) problems.push([subjectInput, 'A user id is 1 to 200 visible ASCII characters, no spaces.']);
    if (problems.length > 0) {
      for (const [input, message] of problems) fieldError(input, message);
      problems[0][0].focus();
      return;
    }
    navigate(`/iam/console/explain${query({ permission: code, resourceType: type, resourceId: id, access: type === '' ? '' : accessSelect.value, subject: user })}`);
  });

  const result = h('section', { 'aria-labelledby': 'result-heading', class: 'result' });
  root.append(h('div', { class: 'columns' }, byId, byRequest, byCheck), result);

  if (decisionId === '' && path === '' && permission === '') {
    replace(result, h('h2', { id: 'result-heading', class: 'visually-hidden' }, 'Decision'), h('p', { class: 'muted' }, 'Enter a decision id, a method and path, or a permission, to see how the gateway decides.'));
    return;
  }
  replace(result, h('h2', { id: 'result-heading' }, 'Decision'), h('p', { class: 'muted' }, 'Loading…'));
  if (decisionId === '' && path === '') {
    await showCheck(result, { permission, resourceType, resourceId, access, subject }, isCurrent);
    return;
  }
  try {
    const answer =
      decisionId !== ''
        ? await api(`/iam/authorization/decisions/${seg(decisionId)}`)
        : await api('/iam/authorization/diagnostics', { method: 'POST', body: userId !== '' ? { method, path, userId } : { method, path } });
    if (!isCurrent()) return;
    replace(result, h('h2', { id: 'result-heading' }, 'Decision'), decisionView(answer.data, decisionId === '' ? `${method} ${path}` : null));
    announce(answer.data.allowed ? (answer.data.shadowed ? 'Allowed (shadow mode: would be denied).' : 'Allowed.') : `Denied at ${answer.data.failedStep ?? 'a step'}.`);
  } catch (error) {
    if (!isCurrent()) return;
    const context =
      decisionId === '' && userId !== ''
        ? { action: 'explain a request as another user', permission: 'iam.admin.diagnostics:read' }
        : { action: 'explain this', permission: null };
    const view = problemView(error, context);
    if (error && error.code === 'IAM_DECISION_NOT_FOUND') {
      view.append(h('p', null, 'A decision is visible to the user it concerns, and to holders of iam.admin.audit:read.'));
    }
    replace(result, h('h2', { id: 'result-heading' }, 'Decision'), view);
  }
}

const PERMISSION_CODE = /^(\*:\*|[A-Za-z0-9_.-]+:([A-Za-z0-9_.-]+|\*))$/;

/** Runs one check (POST /iam/authorization/check), then shows the decision it recorded, with its steps. */
async function showCheck(result, { permission, resourceType, resourceId, access, subject }, isCurrent) {
  const check = { permissionCode: permission, ...(resourceType !== '' ? { resource: { type: resourceType, id: resourceId, access } } : {}) };
  try {
    const answer = await api('/iam/authorization/check', { method: 'POST', body: { checks: [check], ...(subject !== '' ? { subject: { userId: subject } } : {}) } });
    const outcome = answer.data.results[0];
    // The decision behind the answer, as the user it concerns (or an auditor) may read it.
    const decision = await api(`/iam/authorization/decisions/${seg(outcome.decisionId)}`).then((found) => found.data, () => null);
    if (!isCurrent()) return;
    const request = `${permission}${resourceType !== '' ? ` on ${resourceType} ${resourceId} (${access})` : ''} for ${answer.data.subject.userId}`;
    replace(
      result,
      h('h2', { id: 'result-heading' }, 'Decision'),
      decision !== null
        ? decisionView(decision, request)
        : h('p', { class: 'verdict' }, outcome.allowed ? badge('Allowed', 'ok') : badge('Denied', 'bad'), ' ', outcome.failedStep ? h('code', null, outcome.failedStep) : '', ' — decision ', h('code', null, outcome.decisionId)),
    );
    announce(outcome.allowed ? 'Allowed.' : `Denied at ${outcome.failedStep ?? 'a step'}.`);
  } catch (error) {
    if (!isCurrent()) return;
    const context = subject !== '' ? { action: 'run a check for another user', permission: 'iam.authorization.decisions:check' } : { action: 'run this check', permission: null };
    replace(result, h('h2', { id: 'result-heading' }, 'Decision'), problemView(error, context));
  }
}

/** A route's list filter: which elements of the host's answer a caller sees. */
function filterView(filter) {
  return h(
    'span',
    null,
    filter.items === '' ? 'the answer' : ['the array at ', h('code', null, filter.items)],
    ' keeps the elements whose ',
    h('code', null, filter.id),
    ' is a ',
    h('code', null, filter.type),
    ` the profile covers (${filter.access}); a profile covering every ${filter.type} gets the answer untouched`,
  );
}

/** One decision: verdict, route (file:line, mode), permission, profile, the ordered steps, the resource. */
export function decisionView(decision, request) {
  const route = decision.route ?? null;
  const resource = decision.resource ?? null;
  const verdict = decision.allowed
    ? decision.shadowed
      ? [badge('Allowed', 'ok'), ' ', badge('shadow mode: would be denied', 'warn')]
      : badge('Allowed', 'ok')
    : badge('Denied', 'bad');
  const steps = h(
    'ol',
    { class: 'steps' },
    (decision.steps ?? []).map((step) =>
      h(
        'li',
        { class: step.passed ? 'step step-passed' : 'step step-failed' },
        h('span', { class: 'step-mark', 'aria-hidden': 'true' }, step.passed ? '✓' : '✗'),
        h('span', { class: 'visually-hidden' }, step.passed ? 'passed: ' : 'failed: '),
        h('code', { class: 'step-code' }, step.code),
        ' ',
        h('span', { class: 'step-reason' }, step.reason),
      ),
    ),
  );
  return h(
    'div',
    { class: 'decision' },
    h('p', { class: 'verdict' }, verdict),
    facts([
      ['Request', request],
      [
        'Route',
        route
          ? h('span', null, h('code', null, route.pattern), ' ', h('span', { class: 'source' }, h('code', null, `${route.file}:${route.line}`)))
          : 'no route matched',
      ],
      ['Mode', route ? (route.mode === 'shadow' ? badge('shadow (reports, does not enforce)', 'warn') : 'enforce') : null],
      ['List filter', route && route.filter ? filterView(route.filter) : null],
      ['Permission', route && route.public ? 'public (no permission)' : decision.permissionCode ? h('code', null, decision.permissionCode) : 'none'],
      ['User', decision.userId ? h('code', null, decision.userId) : null],
      ['Profile', decision.profileId ? h('code', null, decision.profileId) : 'none'],
      [
        'Resource',
        resource
          ? h(
              'span',
              null,
              h('code', null, `${resource.type} ${resource.id}`),
              ` (${resource.access}); resolver answered: `,
              resource.scopeRefs === undefined
                ? 'not asked'
                : resource.scopeRefs.length === 0
                  ? 'no scopes'
                  : resource.scopeRefs.map((ref, index) => [index > 0 ? ', ' : '', h('code', null, `${ref.type} ${ref.id}`)]),
            )
          : null,
      ],
      ['Status', decision.problemCode ? h('span', null, String(decision.status), ' ', h('code', null, decision.problemCode)) : String(decision.status)],
      ['Decision id', h('code', null, decision.decisionId)],
      ['Evaluated', when(decision.evaluatedAt)],
    ]),
    h('h3', null, 'Steps'),
    steps,
  );
}
