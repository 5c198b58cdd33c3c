// /iam/console/access[?q=…][&userId=…]: users, a user's identities and profiles (with scopes), the permission
// templates; enable/disable users and profiles and edit scopes where the viewer holds the write permission; create
// users, identities, profiles and template versions (access-create.js).
import { api, grants, IDENTIFIER, query, seg } from './api.js';
import { identityCreateForm, profileCreateForm, templateCreateForm, userCreateForm } from './access-create.js';
import { append, badge, button, confirmButton, facts, field, fieldError, h, replace, table, when } from './dom.js';
import { problemView } from './problems.js';
import { announce } from './status.js';

const PAGE_SIZE = 50;

/**
 * What the viewer's active profile grants (its template's permission codes), or null when that cannot be read
 * (no iam.admin.templates:read): then every edit control is shown and the gateway decides.
 */
async function viewerPermissions() {
  try {
    const [me, profiles, templates] = await Promise.all([api('/iam/auth/me'), api('/iam/authorization/profiles'), api('/iam/admin/templates')]);
    const active = profiles.data.find((profile) => profile.profileId === me.data.activeProfileId);
    const template = active && templates.data.find((candidate) => candidate.versionId === active.templateVersionId);
    return template ? template.permissions : [];
  } catch {
    return null;
  }
}

const may = (permissions, code) => permissions === null || grants(permissions, code);

/**
 * The template list of the page, shared by the templates table and the profile form's select: `get()` is the answer
 * (a promise of the list; it rejects with the ApiError); `refresh()` reads it again and tells every subscriber.
 */
function templateStore() {
  const load = () => {
    const answer = api('/iam/admin/templates').then((result) => result.data);
    answer.catch(() => {}); // each reader handles the failure
    return answer;
  };
  const listeners = new Set();
  let current = load();
  return {
    get: () => current,
    refresh() {
      current = load();
      for (const listener of listeners) listener(current);
      return current;
    },
    subscribe: (listener) => listeners.add(listener),
  };
}

export async function renderAccess({ root, heading, params, navigate, isCurrent }) {
  heading('Access');
  const userId = params.get('userId') ?? '';
  const q = params.get('q') ?? '';
  const permissions = viewerPermissions();
  const templates = templateStore();

  const usersSection = h('section', { 'aria-labelledby': 'users-heading' }, h('h2', { id: 'users-heading' }, 'Users'));
  const detailSection = userId !== '' ? h('section', { 'aria-labelledby': 'user-heading', class: 'user-detail' }) : null;
  const templatesSection = h('section', { 'aria-labelledby': 'templates-heading' }, h('h2', { id: 'templates-heading' }, 'Permission templates'));
  // Without a userId there is no detail section (Node.append would write a null as the text "null").
  append(root, [usersSection, detailSection, templatesSection]);

  await Promise.all([
    renderUsers(usersSection, { q, userId, navigate, isCurrent, permissions }),
    detailSection ? renderUserDetail(detailSection, userId, permissions, templates, isCurrent) : null,
    renderTemplates(templatesSection, { isCurrent, permissions, templates }),
  ]);
}

/** The user list: a search box (q, in the URL) and pages of 50 ("More" follows nextCursor); the new-user form. */
async function renderUsers(section, { q, userId, navigate, isCurrent, permissions }) {
  const searchInput = h('input', { type: 'search', name: 'q', value: q, autocomplete: 'off', spellcheck: 'false' });
  const form = h('form', { class: 'inline-form', role: 'search', novalidate: true }, field('Find users (id or name)', searchInput), h('button', { type: 'submit' }, 'Search'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    navigate(`/iam/console/access${query({ q: searchInput.value.trim(), userId })}`);
  });
  const holder = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  section.append(form, holder);
  const users = [];
  let cursor = null;
  const draw = () => {
    replace(
      holder,
      users.length === 0
        ? h('p', null, q ? `No user matches "${q}".` : 'No users.')
        : table(
            'Users',
            ['User id', 'Name', 'State', 'Authorization version'],
            users.map((user) => [
              h('a', { href: `/iam/console/access${query({ q, userId: user.userId })}`, 'aria-current': user.userId === userId ? 'true' : null }, user.userId),
              user.displayName ?? '—',
              user.enabled ? badge('enabled', 'ok') : badge('disabled', 'bad'),
              String(user.authorizationVersion),
            ]),
          ),
      cursor ? h('p', null, button('More users', more)) : null,
    );
  };
  const load = async () => {
    const { data } = await api(`/iam/admin/users${query({ limit: PAGE_SIZE, q, cursor })}`);
    users.push(...data.items);
    cursor = data.nextCursor;
    draw();
  };
  const more = async () => {
    const before = users.length;
    try {
      await load();
      announce(`${users.length - before} more users.`);
    } catch (error) {
      holder.append(problemView(error));
    }
  };
  // After a create: the list from its first page again, with the new user in it.
  const refresh = async () => {
    users.length = 0;
    cursor = null;
    try {
      await load();
    } catch (error) {
      replace(holder, problemView(error, { action: 'see the users', permission: 'iam.admin.users:read' }));
    }
  };
  try {
    await load();
  } catch (error) {
    if (isCurrent()) replace(holder, problemView(error, { action: 'see the users', permission: 'iam.admin.users:read' }));
  }
  if (isCurrent() && may(await permissions, 'iam.admin.users:write')) section.append(userCreateForm(refresh));
}

/**
 * The user's record, identities and profiles (reloaded after each change), then the forms creating an identity and a
 * profile of the user (built once, so their messages stay through a reload).
 */
async function renderUserDetail(section, userId, permissionsPromise, templates, isCurrent) {
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  replace(section, h('h2', { id: 'user-heading' }, 'User ', h('code', null, userId)), body);
  let identityIds = [];
  const reload = async () => {
    const state = await renderUserBody(body, userId, permissionsPromise, isCurrent, reload);
    identityIds = state.identityIds;
    return state;
  };
  const { exists, held } = await reload();
  if (!isCurrent() || !exists) return;
  const forms = [
    may(held, 'iam.admin.identities:write') ? identityCreateForm(userId, () => identityIds, reload) : null,
    may(held, 'iam.admin.profiles:write') ? profileCreateForm(userId, templates, reload) : null,
  ].filter(Boolean);
  if (forms.length > 0) section.append(h('div', { class: 'create-forms' }, forms));
}

/** The user's facts, identities and profiles into `body`; resolves whether the user exists, and their identity ids. */
async function renderUserBody(body, userId, permissionsPromise, isCurrent, reload) {
  const message = h('div');
  const [userAnswer, identities, profiles, permissions, signIn] = await Promise.allSettled([
    api(`/iam/admin/users/${seg(userId)}`),
    api(`/iam/admin/users/${seg(userId)}/identities`),
    api(`/iam/admin/users/${seg(userId)}/profiles`),
    permissionsPromise,
    lastSignIn(userId),
  ]);
  const held = permissions.status === 'fulfilled' ? permissions.value : null;
  const state = { exists: userAnswer.status === 'fulfilled', held, identityIds: identities.status === 'fulfilled' ? identities.value.data.map((identity) => identity.identityId) : [] };
  if (!isCurrent()) return state;
  const parts = [message];

  if (userAnswer.status === 'rejected' && userAnswer.reason?.status !== 404) {
    parts.push(problemView(userAnswer.reason, { action: 'see the users', permission: 'iam.admin.users:read' }));
  } else {
    const user = userAnswer.status === 'fulfilled' ? userAnswer.value.data : null;
    if (!user) {
      parts.push(h('p', null, 'No such user.'));
    } else {
      const write = async (enabled) => {
        try {
          // If-Match: a page older than another admin's change gets 409 and reloads, never undoes it.
          await api(`/iam/admin/users/${seg(userId)}`, { method: 'PUT', body: { enabled }, headers: { 'if-match': `"${user.version}"` } });
          announce(`User ${userId} ${enabled ? 'enabled' : 'disabled'}.`);
          await reload();
        } catch (error) {
          replace(message, problemView(error, { action: 'change users', permission: 'iam.admin.users:write', reload }));
        }
      };
      parts.push(
        facts([
          ['Name', user.displayName ?? '—'],
          ['State', user.enabled ? badge('enabled', 'ok') : badge('disabled', 'bad')],
          ['Authorization version', String(user.authorizationVersion)],
          ['Created', user.createdAt ? when(user.createdAt) : null],
          ['Updated', user.updatedAt ? when(user.updatedAt) : null],
        ]),
        may(held, 'iam.admin.users:write')
          ? h(
              'p',
              null,
              user.enabled
                ? confirmButton('Disable user', 'Confirm', () => write(false), { 'aria-label': `Disable user ${userId} (ends every session)` })
                : button('Enable user', () => write(true)),
            )
          : null,
      );
    }
  }

  parts.push(h('h3', null, 'Identities'));
  if (identities.status === 'rejected') parts.push(problemView(identities.reason, { action: 'see identities', permission: 'iam.admin.users:read' }));
  else if (identities.value.data.length === 0) parts.push(h('p', null, 'No identities.'));
  else
    parts.push(
      table(
        `Identities of ${userId}`,
        ['Identity id', 'Domain', 'State'],
        identities.value.data.map((identity) => [h('code', null, identity.identityId), h('code', null, identity.identityDomain), identity.enabled ? badge('enabled', 'ok') : badge('disabled', 'bad')]),
      ),
    );

  parts.push(h('h3', null, 'Profiles'));
  if (profiles.status === 'rejected') parts.push(problemView(profiles.reason, { action: 'see profiles', permission: 'iam.admin.profiles:read' }));
  else if (profiles.value.data.length === 0) parts.push(h('p', null, 'No profiles.'));
  else parts.push(h('div', { class: 'profiles' }, profiles.value.data.map((profile) => profileEditor(profile, may(held, 'iam.admin.profiles:write'), reload))));

  parts.push(h('h3', null, 'Last sign-in'));
  if (signIn.status === 'rejected') parts.push(problemView(signIn.reason, { action: 'see sign-ins', permission: 'iam.admin.audit:read' }));
  else parts.push(...signInView(signIn.value));

  replace(body, parts);
  return state;
}

/**
 * The user's last sign-in (`auth.login`) and the `iam.oidc.profiles` rules it skipped (`oidc.claim-rule.skipped`,
 * recorded with the same request id): why a user who signed in has no profile.
 */
async function lastSignIn(userId) {
  const logins = await api(`/iam/admin/audit${query({ userId, action: 'auth.login', limit: 1 })}`);
  const login = logins.data.items[0] ?? null;
  if (login === null) return { login, skipped: [] };
  const skipped = await api(`/iam/admin/audit${query({ userId, action: 'oidc.claim-rule.skipped', since: login.occurredAt, limit: 100 })}`);
  return { login, skipped: skipped.data.items.filter((event) => event.requestId === login.requestId).reverse() };
}

function signInView({ login, skipped }) {
  if (login === null) return [h('p', null, 'No sign-in recorded.')];
  const details = login.details ?? {};
  return [
    facts([
      ['When', when(login.occurredAt)],
      ['Method', details.authenticator ? h('code', null, details.authenticator) : null],
      ['Active profile', details.activeProfileId ? h('code', null, details.activeProfileId) : badge('none', 'warn')],
    ]),
    skipped.length === 0
      ? null
      : h(
          'div',
          { class: 'skipped-rules' },
          h('p', null, badge('rules skipped', 'warn'), ' The provider\'s claims met these iam.oidc.profiles rules, but a claim their scopes need was unusable, so they gave no profile:'),
          h(
            'ul',
            null,
            // The reason as audited: missing, wrong-type or no-usable-value (docs/oidc.md says what each means).
            skipped.map((event) => h('li', null, 'Rule ', h('code', null, String(event.details?.rule)), ', scope claim ', h('code', null, String(event.details?.claim)), ': ', String(event.details?.reason))),
          ),
        ),
  ].filter(Boolean);
}

/** One profile: its facts, enable/disable, and its scopes as an editable list (If-Match: its version). */
function profileEditor(initial, canWrite, reloadAll) {
  let profile = initial;
  const card = h('article', { class: 'card profile', 'data-profile-id': profile.profileId, 'aria-labelledby': `profile-${profile.profileId}-heading` });
  const message = h('div');

  const draw = () => {
    const title = h('h4', { id: `profile-${profile.profileId}-heading` }, profile.profileName, ' ', h('code', { class: 'muted' }, profile.profileId));
    const state = [profile.enabled ? badge('enabled', 'ok') : badge('disabled', 'bad'), profile.revoked ? [' ', badge('revoked', 'bad')] : null];
    card.replaceChildren(
      title,
      facts([
        ['Template', h('code', null, profile.templateVersionId)],
        ['Client types', profile.clientTypes.join(', ') || 'none'],
        ['State', h('span', null, state)],
        ['Applies to', profile.unscoped ? badge('every resource (unscoped)', 'warn') : profile.scopes.length === 0 ? 'no resource (scoped, no scopes)' : 'the scopes below'],
        ['Version', String(profile.version)],
      ]),
      canWrite && !profile.revoked ? h('p', null, button(profile.enabled ? 'Disable profile' : 'Enable profile', toggle, { 'aria-label': `${profile.enabled ? 'Disable' : 'Enable'} profile ${profile.profileName}` })) : null,
      message,
      scopesForm(),
    );
  };

  const saved = (answer, text) => {
    profile = answer.data;
    replace(message, h('p', { class: 'notice' }, text));
    draw();
    announce(text);
  };

  const failed = (error, action) => {
    replace(message, problemView(error, { action, permission: 'iam.admin.profiles:write', reload: reloadAll }));
  };

  const toggle = async () => {
    const body = {
      userId: profile.userId,
      profileName: profile.profileName,
      templateVersionId: profile.templateVersionId,
      clientTypes: profile.clientTypes,
      enabled: !profile.enabled,
      revoked: profile.revoked,
    };
    try {
      const answer = await api(`/iam/admin/profiles/${seg(profile.profileId)}`, { method: 'PUT', body, headers: { 'if-match': `"${profile.version}"` } });
      saved(answer, `Profile ${profile.profileName} ${body.enabled ? 'enabled' : 'disabled'}.`);
    } catch (error) {
      failed(error, 'change profiles');
    }
  };

  const scopesForm = () => {
    const rows = [];
    const list = h('ol', { class: 'scope-rows' });
    const addRow = (scope) => {
      const row = { type: null, ref: null, access: null, element: null };
      row.type = h('input', { type: 'text', name: 'scopeType', value: scope.scopeType, required: true, autocomplete: 'off', spellcheck: 'false', readonly: !canWrite });
      row.ref = h('input', { type: 'text', name: 'scopeRefId', value: scope.scopeRefId, required: true, autocomplete: 'off', spellcheck: 'false', readonly: !canWrite });
      row.access = h('select', { name: 'accessMode', disabled: !canWrite }, ['READ', 'WRITE'].map((mode) => h('option', { value: mode, selected: scope.accessMode === mode }, mode)));
      const label = (text) => [h('span', { class: 'visually-hidden scope-number' }), text];
      row.element = h(
        'li',
        { class: 'scope-row' },
        field(label('Type'), row.type),
        field(label('Resource id'), row.ref),
        field(label('Access'), row.access),
        canWrite
          ? button('Remove', () => {
              rows.splice(rows.indexOf(row), 1);
              row.element.remove();
              renumber();
              announce('Scope removed (not saved yet).');
            }, { class: 'secondary remove-scope' })
          : null,
      );
      rows.push(row);
      list.append(row.element);
      renumber();
      return row;
    };
    // The labels say which scope a field belongs to ("Scope 2 resource id"), also after a removal.
    const renumber = () => {
      rows.forEach((row, index) => {
        for (const number of row.element.querySelectorAll('.scope-number')) number.textContent = `Scope ${index + 1} `;
        row.element.querySelector('.remove-scope')?.setAttribute('aria-label', `Remove scope ${index + 1}`);
      });
    };
    for (const scope of profile.scopes) addRow(scope);
    const errors = h('div');
    const form = h(
      'form',
      { class: 'scopes', novalidate: true },
      h(
        'fieldset',
        null,
        h('legend', null, `Scopes of ${profile.profileName}`),
        profile.unscoped ? h('p', { class: 'hint' }, 'This profile is unscoped (every resource). Saving scopes makes it scoped: it then applies to the listed resources only.') : null,
        list,
        rows.length === 0 ? h('p', { class: 'hint' }, 'No scopes.') : null,
        canWrite
          ? h(
              'p',
              { class: 'actions' },
              button('Add scope', () => {
                const row = addRow({ scopeType: 'PROJECT', scopeRefId: '', accessMode: 'READ' });
                row.ref.focus();
              }, { class: 'secondary' }),
              ' ',
              h('button', { type: 'submit' }, 'Save scopes'),
            )
          : h('p', { class: 'hint' }, 'Read only: editing needs iam.admin.profiles:write.'),
        errors,
      ),
    );
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      replace(errors);
      const scopes = rows.map((row) => ({ scopeType: row.type.value.trim(), scopeRefId: row.ref.value.trim(), accessMode: row.access.value }));
      // The API schema's rules first: identifiers of visible ASCII, one entry per resource.
      let first = null;
      const seen = new Set();
      rows.forEach((row, index) => {
        const scope = scopes[index];
        const typeError = IDENTIFIER.test(scope.scopeType) ? null : 'Required: 1 to 200 visible ASCII characters, e.g. PROJECT.';
        let refError = IDENTIFIER.test(scope.scopeRefId) ? null : 'Required: 1 to 200 visible ASCII characters, e.g. 2 (or * for every one).';
        const key = `${scope.scopeType}\u0000${scope.scopeRefId}`;
        if (refError === null && seen.has(key)) refError = 'This resource is already listed above (one access mode per resource).';
        seen.add(key);
        fieldError(row.type, typeError);
        fieldError(row.ref, refError);
        if (!first && (typeError || refError)) first = typeError ? row.type : row.ref;
      });
      if (first) {
        announce('Some scopes are not valid; see the messages next to the fields.');
        first.focus();
        return;
      }
      const submit = form.querySelector('button[type=submit]');
      submit.disabled = true;
      try {
        const answer = await api(`/iam/admin/profiles/${seg(profile.profileId)}/scopes`, { method: 'PUT', body: scopes, headers: { 'if-match': `"${profile.version}"` } });
        saved(answer, `Scopes of ${profile.profileName} saved.`);
      } catch (error) {
        submit.disabled = false;
        // A validation failure names JSON pointers (/0/scopeRefId): shown next to those fields.
        const unplaced = [];
        for (const problem of (error.status === 400 && error.problem && error.problem.errors) || []) {
          const match = /^\/(\d+)(?:\/(scopeType|scopeRefId|accessMode))?$/.exec(problem.pointer ?? '');
          const row = match ? rows[Number(match[1])] : undefined;
          if (row) fieldError(match[2] === 'scopeType' || match[2] === undefined ? row.type : match[2] === 'accessMode' ? row.access : row.ref, problem.message);
          else unplaced.push(problem);
        }
        replace(errors, problemView(error.status === 400 && unplaced.length === 0 ? { status: 400, problem: { ...error.problem, errors: undefined } } : error, { action: 'change scopes', permission: 'iam.admin.profiles:write', reload: reloadAll }));
      }
    });
    return form;
  };

  draw();
  return card;
}

/** Every template version and its permission codes; the new-template form. */
async function renderTemplates(section, { isCurrent, permissions, templates }) {
  const holder = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  section.append(holder);
  await drawTemplates(holder, isCurrent, templates.get());
  if (!isCurrent() || !may(await permissions, 'iam.admin.templates:write')) return;
  section.append(templateCreateForm(() => drawTemplates(holder, isCurrent, templates.refresh())));
}

/** The templates table from `list`, the store's answer (a promise of the list; rejected: the problem is shown). */
async function drawTemplates(holder, isCurrent, list) {
  try {
    const data = await list;
    if (!isCurrent()) return;
    replace(
      holder,
      data.length === 0
        ? h('p', null, 'No templates.')
        : table(
            'Permission templates',
            ['Version', 'Name', 'Description', 'Permissions'],
            data.map((template) => [
              h('code', null, template.versionId),
              template.name,
              template.description ?? '—',
              h('ul', { class: 'codes' }, template.permissions.map((code) => h('li', null, h('code', null, code)))),
            ]),
          ),
    );
  } catch (error) {
    if (isCurrent()) replace(holder, problemView(error, { action: 'see the templates', permission: 'iam.admin.templates:read' }));
  }
}
