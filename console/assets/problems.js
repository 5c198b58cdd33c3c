// API failures as readable messages, built from the problem+json body: never the raw JSON.
import { announce } from './status.js';
import { button, h } from './dom.js';

/** The console URL the browser shows now, to come back to after signing in again. */
const currentConsoleUrl = () => location.pathname + location.search;

/** Where a 401 sends the user: the login page, back to this console URL afterwards. */
export const loginUrl = () => `/iam/login?returnTo=${encodeURIComponent(currentConsoleUrl())}`;

/** The decision id, as a link to its explanation. */
const decisionLink = (decisionId) => h('a', { href: `/iam/console/explain?decisionId=${encodeURIComponent(decisionId)}` }, h('code', null, decisionId));

/** What a problem carries besides its title: code, step, decision, request id, field errors. */
function details(problem) {
  const rows = [];
  if (problem.code) rows.push(['Code', h('code', null, problem.code)]);
  if (problem.step) rows.push(['Step that failed', h('code', null, problem.step)]);
  if (problem.decisionId) rows.push(['Decision id', decisionLink(problem.decisionId)]);
  if (problem.requestId) rows.push(['Request id', h('code', null, problem.requestId)]);
  return [
    rows.length > 0 ? h('dl', { class: 'facts' }, rows.map(([term, value]) => [h('dt', null, term), h('dd', null, value)])) : null,
    Array.isArray(problem.errors) && problem.errors.length > 0
      ? h(
          'ul',
          { class: 'problem-errors' },
          problem.errors.map((error) => h('li', null, error.pointer && error.pointer !== '/' ? [h('code', null, error.pointer), ': '] : null, String(error.message))),
        )
      : null,
  ];
}

/**
 * The message for an API failure (an {@link ApiError}, or any error):
 * - 401: "Your session ended — sign in again", with a link to the login page and back here;
 * - 403 IAM_ACCESS_DENIED with `rule: ESCALATION_PREVENTION`: "You cannot grant what you do not hold";
 * - 403 IAM_ACCESS_DENIED and `context.action`/`context.permission`: "You are not allowed to … (needs …)";
 * - 409 IAM_CONFLICT: "Changed by someone else — reload", with a Reload button when `context.reload` is given (not for
 *   `context.creating`: a create's 409 is about its id, shown with its title and detail like any other problem);
 * - anything else: the problem's title and detail, with its code, step, decision id and field errors.
 * The message is also announced in the live region.
 */
export function problemView(error, context = {}) {
  const problem = error && typeof error === 'object' && 'problem' in error ? error.problem : { title: 'Something went wrong', detail: error instanceof Error ? error.message : String(error) };
  const status = error && typeof error === 'object' && 'status' in error ? error.status : 0;
  let view;
  if (status === 401) {
    view = h(
      'div',
      { class: 'problem problem-session' },
      h('p', { class: 'problem-title' }, 'Your session ended — sign in again'),
      problem.detail ? h('p', null, problem.detail) : null,
      h('p', null, h('a', { href: loginUrl() }, 'Sign in again')),
    );
  } else if (status === 403 && problem.rule === 'ESCALATION_PREVENTION') {
    view = h('div', { class: 'problem' }, h('p', { class: 'problem-title' }, 'You cannot grant what you do not hold'), problem.detail ? h('p', null, problem.detail) : null, details(problem));
  } else if (status === 403 && problem.code === 'IAM_ACCESS_DENIED' && context.action) {
    view = h(
      'div',
      { class: 'problem problem-denied' },
      h('p', { class: 'problem-title' }, `You are not allowed to ${context.action}`, context.permission ? [' (needs ', h('code', null, context.permission), ')'] : null, '.'),
      problem.detail ? h('p', null, problem.detail) : null,
      details(problem),
    );
  } else if (status === 409 && problem.code === 'IAM_CONFLICT' && !context.creating) {
    view = h(
      'div',
      { class: 'problem' },
      h('p', { class: 'problem-title' }, 'Changed by someone else — reload'),
      h('p', null, 'Someone changed this since it was loaded; reload to see the current state, then make your change again.'),
      context.reload ? h('p', null, button('Reload', context.reload)) : null,
    );
  } else {
    view = h('div', { class: 'problem' }, h('p', { class: 'problem-title' }, problem.title || 'Request failed'), problem.detail ? h('p', null, problem.detail) : null, details(problem));
  }
  announce(view.querySelector('.problem-title')?.textContent ?? '');
  return view;
}
