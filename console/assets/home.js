// /iam/console: who is signed in, and the pages.
import { api } from './api.js';
import { facts, h } from './dom.js';
import { problemView } from './problems.js';

const PAGES = [
  ['/iam/console/explain', 'Explain', 'why a request was allowed or denied: by decision id, or for a method and path.'],
  ['/iam/console/policy', 'Policy', 'the routes the gateway enforces, the last reload error, coverage of a host API.'],
  ['/iam/console/sessions', 'Sessions', 'your sessions, and (administrators) the sessions of a user; revoke them.'],
  ['/iam/console/access', 'Access', 'users, their identities, profiles and scopes, and the permission templates.'],
  ['/iam/console/audit', 'Audit', 'the audit trail, filtered by user, action and time.'],
  ['/iam/console/me', 'Me', 'your principal and profiles; switch profile, sign out.'],
];

export async function renderHome({ root, heading, isCurrent }) {
  heading('IAM console');
  const who = h('section', { 'aria-labelledby': 'who-heading' }, h('h2', { id: 'who-heading' }, 'Signed in'), h('p', { class: 'muted' }, 'Loading…'));
  root.append(
    who,
    h(
      'section',
      { 'aria-labelledby': 'pages-heading' },
      h('h2', { id: 'pages-heading' }, 'Pages'),
      h('ul', { class: 'page-list' }, PAGES.map(([href, name, text]) => h('li', null, h('a', { href }, name), ': ', text))),
    ),
  );
  try {
    const { data: me } = await api('/iam/auth/me');
    if (!isCurrent()) return;
    who.lastChild.replaceWith(
      facts([
        ['Name', me.displayName ?? me.userId],
        ['User id', h('code', null, me.userId)],
        ['Identity', h('span', null, h('code', null, me.identityId), ' at ', h('code', null, me.identityDomain))],
        ['Active profile', me.activeProfileId ? h('code', null, me.activeProfileId) : 'none'],
      ]),
    );
  } catch (error) {
    if (isCurrent()) who.lastChild.replaceWith(problemView(error));
  }
}
