// /iam/console/sessions[?userId=…]: my sessions (revoke one, or every other one), and for administrators the
// sessions of any user (revoke one, or end them all). Lists page through the `Link: <…>; rel="next"` header.
import { api, IDENTIFIER, nextLink, query, seg } from './api.js';
import { badge, button, confirmButton, field, fieldError, h, replace, table, when } from './dom.js';
import { problemView } from './problems.js';
import { announce } from './status.js';

const STATE_KIND = { active: 'ok', revoked: 'bad', logged_out: 'neutral', expired: 'neutral' };

/**
 * A paged session list: loads `firstUrl`, then "More" follows the Link header. `actions(session)` gives the cells'
 * buttons. `onFailure(error)` renders a failure of the first page in place of the list.
 */
function sessionList({ caption, firstUrl, actions, onFailure }) {
  const holder = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  const rows = [];
  let next = null;
  const draw = () => {
    replace(
      holder,
      rows.length === 0
        ? h('p', null, 'No sessions.')
        : table(
            caption,
            ['Created', 'Last seen', 'Client', 'Profile', 'State', 'Actions'],
            rows.map((session) =>
              h(
                'tr',
                { 'data-session-id': session.sessionId, class: session.current ? 'current' : null },
                h('td', null, when(session.createdAt)),
                h('td', null, when(session.lastSeenAt)),
                h('td', null, session.clientType),
                h('td', null, session.activeProfileId ? h('code', null, session.activeProfileId) : 'none'),
                h(
                  'td',
                  null,
                  badge(session.state.replace('_', ' '), STATE_KIND[session.state] ?? 'neutral'),
                  session.current ? [' ', badge('this session', 'info')] : null,
                  session.revokeReason ? h('span', { class: 'muted' }, ` (${session.revokeReason})`) : null,
                ),
                h('td', null, actions(session)),
              ),
            ),
          ),
      next ? h('p', null, button('More', more)) : null,
    );
  };
  const load = async (url) => {
    const answer = await api(url);
    rows.push(...answer.data);
    next = nextLink(answer.headers);
    draw();
  };
  const more = async () => {
    try {
      const before = rows.length;
      await load(next);
      announce(`${rows.length - before} more sessions.`);
    } catch (error) {
      holder.append(problemView(error));
    }
  };
  const reload = async () => {
    rows.length = 0;
    next = null;
    try {
      await load(firstUrl);
    } catch (error) {
      replace(holder, onFailure ? onFailure(error) : problemView(error));
    }
  };
  return { element: holder, reload };
}

export async function renderSessions({ root, heading, params, navigate }) {
  heading('Sessions');
  const userId = params.get('userId') ?? '';

  // Mine.
  const mineMessage = h('div');
  const mine = sessionList({
    caption: 'My sessions',
    firstUrl: '/iam/sessions',
    actions: (session) =>
      session.state === 'active' && !session.current
        ? confirmButton('Revoke', 'Confirm', async () => {
            try {
              await api(`/iam/sessions/${seg(session.sessionId)}/revoke`, { method: 'POST' });
              announce('Session revoked.');
              replace(mineMessage);
              await mine.reload();
            } catch (error) {
              replace(mineMessage, problemView(error));
            }
          }, { 'aria-label': `Revoke session ${session.sessionId}` })
        : session.current
          ? h('span', { class: 'muted' }, 'sign out on the Me page')
          : '',
  });
  const revokeOthers = confirmButton('Revoke all my other sessions', 'Confirm', async () => {
    try {
      await api('/iam/sessions/revoke-others', { method: 'POST' });
      announce('Every other session of yours was revoked.');
      replace(mineMessage);
      await mine.reload();
    } catch (error) {
      replace(mineMessage, problemView(error));
    }
  });
  root.append(h('section', { 'aria-labelledby': 'mine-heading' }, h('h2', { id: 'mine-heading' }, 'My sessions'), h('p', null, revokeOthers), mineMessage, mine.element));

  // A user's (administrators).
  const userInput = h('input', { type: 'text', name: 'userId', value: userId, autocomplete: 'off', spellcheck: 'false' });
  const form = h('form', { class: 'inline-form', novalidate: true }, field('User id', userInput), h('button', { type: 'submit' }, 'Show sessions'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const value = userInput.value.trim();
    if (!IDENTIFIER.test(value)) {
      fieldError(userInput, 'A user id is 1 to 200 visible ASCII characters, no spaces.');
      userInput.focus();
      return;
    }
    fieldError(userInput, null);
    navigate(`/iam/console/sessions${query({ userId: value })}`);
  });
  const theirs = h('div');
  root.append(
    h(
      'section',
      { 'aria-labelledby': 'user-sessions-heading' },
      h('h2', { id: 'user-sessions-heading' }, 'Sessions of a user'),
      h('p', { class: 'muted' }, 'For administrators: needs iam.admin.sessions:read to list, iam.admin.sessions:revoke to end them.'),
      form,
      theirs,
    ),
  );

  const loads = [mine.reload()];
  if (userId !== '') {
    const adminMessage = h('div');
    const list = sessionList({
      caption: `Sessions of ${userId}`,
      firstUrl: `/iam/admin/users/${seg(userId)}/sessions`,
      actions: (session) =>
        session.state === 'active'
          ? confirmButton('Revoke', 'Confirm', async () => {
              try {
                await api(`/iam/admin/sessions/${seg(session.sessionId)}/revoke`, { method: 'POST' });
                announce('Session revoked.');
                replace(adminMessage);
                await list.reload();
              } catch (error) {
                replace(adminMessage, problemView(error, { action: 'revoke sessions', permission: 'iam.admin.sessions:revoke' }));
              }
            }, { 'aria-label': `Revoke session ${session.sessionId}` })
          : '',
      onFailure: (error) => {
        endAll.hidden = true;
        return problemView(error, { action: `list the sessions of another user`, permission: 'iam.admin.sessions:read' });
      },
    });
    const endAll = h(
      'p',
      null,
      confirmButton('End all sessions of this user', 'Confirm', async () => {
        try {
          const { data } = await api(`/iam/admin/users/${seg(userId)}/sessions/revoke`, { method: 'POST' });
          const message = `${data.revoked} session${data.revoked === 1 ? '' : 's'} of ${userId} ended.`;
          replace(adminMessage, h('p', { class: 'notice' }, message));
          announce(message);
          await list.reload();
        } catch (error) {
          replace(adminMessage, problemView(error, { action: 'end sessions of a user', permission: 'iam.admin.sessions:revoke' }));
        }
      }),
    );
    replace(theirs, h('h3', null, `Sessions of `, h('code', null, userId)), endAll, adminMessage, list.element);
    loads.push(list.reload());
  }
  await Promise.all(loads);
}
