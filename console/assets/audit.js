// /iam/console/audit?userId=&action=&since=&cursor=: the audit trail, newest first, 50 a page. The filters and the
// page's cursor live in the URL, so every page is a deep link.
import { api, IDENTIFIER, query } from './api.js';
import { badge, field, fieldError, h, replace, table, when } from './dom.js';
import { problemView } from './problems.js';
import { announce } from './status.js';

const PAGE_SIZE = 50;
const OUTCOME_KIND = { success: 'ok', failure: 'bad', denied: 'bad', shadow_denied: 'warn' };

/** An ISO instant → the `datetime-local` value of the same instant in the viewer's zone ('' when not a date). */
function toLocalInput(iso) {
  const date = new Date(iso);
  if (!iso || Number.isNaN(date.getTime())) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

/** A `datetime-local` value (the viewer's zone) → ISO 8601 UTC with its zone, as the API wants; null when invalid. */
function fromLocalInput(value) {
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? null : date.toISOString();
}

export async function renderAudit({ root, heading, params, navigate, isCurrent }) {
  heading('Audit');
  const filters = { userId: params.get('userId') ?? '', action: params.get('action') ?? '', since: params.get('since') ?? '' };
  const cursor = params.get('cursor') ?? '';

  const userInput = h('input', { type: 'text', name: 'userId', value: filters.userId, autocomplete: 'off', spellcheck: 'false' });
  const actionInput = h('input', { type: 'text', name: 'action', value: filters.action, autocomplete: 'off', spellcheck: 'false', placeholder: 'authz.deny' });
  const sinceInput = h('input', { type: 'datetime-local', name: 'since', value: toLocalInput(filters.since) });
  const form = h(
    'form',
    { class: 'filters', novalidate: true },
    field('User', userInput, 'The acting user id.'),
    field('Type (action)', actionInput, 'e.g. auth.login, authz.deny, session.revoke.'),
    field('Since', sinceInput, 'Your local time.'),
    h('div', { class: 'filter-actions' }, h('button', { type: 'submit' }, 'Apply filters')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const userId = userInput.value.trim();
    const action = actionInput.value.trim();
    const since = sinceInput.value === '' ? '' : fromLocalInput(sinceInput.value);
    fieldError(userInput, userId === '' || IDENTIFIER.test(userId) ? null : 'A user id is 1 to 200 visible ASCII characters, no spaces.');
    fieldError(actionInput, action.length <= 200 ? null : 'At most 200 characters.');
    fieldError(sinceInput, since === null ? 'Not a date and time.' : null);
    const invalid = form.querySelector('[aria-invalid=true]');
    if (invalid) {
      invalid.focus();
      return;
    }
    navigate(`/iam/console/audit${query({ userId, action, since })}`);
  });

  const results = h('section', { 'aria-labelledby': 'events-heading' }, h('h2', { id: 'events-heading' }, 'Events'), h('p', { class: 'muted' }, 'Loading…'));
  root.append(form, results);

  try {
    const { data } = await api(`/iam/admin/audit${query({ limit: PAGE_SIZE, ...filters, cursor })}`);
    if (!isCurrent()) return;
    const firstPage = `/iam/console/audit${query(filters)}`;
    const nextPage = data.nextCursor ? `/iam/console/audit${query({ ...filters, cursor: data.nextCursor })}` : null;
    const summary =
      data.items.length === 0
        ? cursor
          ? 'No more events.'
          : 'No events match.'
        : `${data.items.length} event${data.items.length === 1 ? '' : 's'}${cursor ? ' (a later page)' : ''}, newest first${nextPage ? '; more on the next page' : '; the last page'}.`;
    replace(
      results,
      h('h2', { id: 'events-heading' }, 'Events'),
      h('p', { class: 'summary' }, summary),
      data.items.length === 0
        ? null
        : table(
            'Audit events',
            ['Time', 'Action', 'Actor', 'Target', 'Outcome', 'Decision'],
            data.items.map((event) =>
              h(
                'tr',
                { 'data-audit-id': event.id },
                h('td', null, when(event.occurredAt)),
                h('td', null, h('code', null, event.action)),
                h('td', null, event.actorUserId ? h('code', null, event.actorUserId) : h('span', { class: 'muted' }, 'anonymous')),
                h('td', null, event.targetType || event.targetId ? h('code', null, [event.targetType, event.targetId].filter(Boolean).join(' ')) : '—'),
                h('td', null, badge(event.outcome.replace('_', ' '), OUTCOME_KIND[event.outcome] ?? 'neutral')),
                h('td', null, event.decisionId ? h('a', { href: `/iam/console/explain${query({ decisionId: event.decisionId })}` }, 'Explain', h('span', { class: 'visually-hidden' }, ` decision ${event.decisionId}`)) : '—'),
              ),
            ),
          ),
      h('nav', { class: 'pager', 'aria-label': 'Audit pages' }, cursor ? h('a', { href: firstPage }, 'First page') : null, nextPage ? h('a', { href: nextPage, rel: 'next' }, 'Next page') : null),
    );
    announce(summary);
  } catch (error) {
    if (isCurrent()) replace(results, h('h2', { id: 'events-heading' }, 'Events'), problemView(error, { action: 'read the audit trail', permission: 'iam.admin.audit:read' }));
  }
}
