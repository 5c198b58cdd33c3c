// The Access page's create forms: a user, an identity of a user, a profile of a user, a template version. Each calls
// the admin API with the session cookie (PUT of a new id) and leaves every rule to it: escalation prevention, the
// client types the gateway accepts, what exists. A problem is shown with its title and detail, and its field errors
// next to the fields they name.
import { api, seg } from './api.js';
import { field, fieldError, h, replace } from './dom.js';
import { problemView } from './problems.js';
import { announce } from './status.js';

/** A checkbox with its label around it (the label is its accessible name). */
function checkbox(label, name, checked) {
  const control = h('input', { type: 'checkbox', name, checked });
  control.defaultChecked = checked; // what form.reset() goes back to
  return { control, element: h('div', { class: 'field field-check' }, h('label', null, control, ' ', label)) };
}

const textInput = (name, attrs = {}) => h('input', { type: 'text', name, autocomplete: 'off', spellcheck: 'false', ...attrs });

/**
 * "Line 2: …" (a text area, one entry a line) or "Item 2: …" (a comma list) for a pointer into a list
 * (`/permissions/1`, `/clientTypes/1`, `/1/scopeRefId`); else the message as it is.
 */
function located(control, pointer, name, message) {
  const index = /^\/(\d+)/.exec(name === '' ? pointer : pointer.slice(name.length + 1));
  return index ? `${control.tagName === 'TEXTAREA' ? 'Line' : 'Item'} ${Number(index[1]) + 1}: ${message}` : message;
}

/**
 * A create form: its heading names it (the form's accessible name), `parts` are its fields, `controls` the controls
 * by the body's property names (for the problem's JSON pointers). `submit()` returns the notice to show, or throws
 * an ApiError; `check()` returns [control, message] pairs found wrong before anything is sent.
 */
function createForm({ id, title, parts, controls, submitLabel, check, submit, action, permission }) {
  const box = h('div', { class: 'form-message' });
  const headingId = `${id}-heading`;
  const form = h('form', { class: 'card create-form', id, novalidate: true, 'aria-labelledby': headingId }, h('h3', { id: headingId }, title), parts, h('p', { class: 'actions' }, h('button', { type: 'submit' }, submitLabel)), box);
  const clear = () => {
    for (const control of Object.values(controls)) fieldError(control, null);
    replace(box);
  };
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clear();
    const wrong = check();
    if (wrong.length > 0) {
      for (const [control, message] of wrong) fieldError(control, message);
      announce('Some fields are not valid; see the messages next to them.');
      wrong[0][0].focus();
      return;
    }
    const button = form.querySelector('button[type=submit]');
    button.disabled = true;
    try {
      const notice = await submit();
      form.reset();
      replace(box, h('p', { class: 'notice' }, notice));
      announce(notice);
    } catch (error) {
      replace(box, failure(error, controls, { action, permission }));
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

/**
 * The problem of a failed create: the field errors of a 400/422 next to the fields their pointers name (`/userId`,
 * `/permissions/2`, `/0/scopeRefId` of a scopes write), the rest (and the title, detail, code) in the problem box.
 */
function failure(error, controls, context) {
  const problem = error && typeof error === 'object' && 'problem' in error ? error.problem : null;
  if (!problem || !Array.isArray(problem.errors) || (error.status !== 400 && error.status !== 422)) return problemView(error, { ...context, creating: true });
  const unplaced = [];
  const messages = new Map();
  for (const item of problem.errors) {
    const pointer = typeof item.pointer === 'string' ? item.pointer : '';
    const name = Object.keys(controls).find((candidate) => (candidate === '' ? /^\/\d+/.test(pointer) : pointer === `/${candidate}` || pointer.startsWith(`/${candidate}/`)));
    if (name === undefined) {
      unplaced.push(item);
      continue;
    }
    const control = controls[name];
    messages.set(control, [...(messages.get(control) ?? []), located(control, pointer, name, String(item.message))]);
  }
  for (const [control, list] of messages) fieldError(control, list.join(' '));
  return problemView({ status: error.status, problem: { ...problem, errors: unplaced } }, { ...context, creating: true });
}

/**
 * The API's rule for an id in a path (IDENTIFIER_PATTERN in src/auth/identity-validation.ts): visible ASCII without
 * / \\ % or ;, not . or .., 1–200 characters. Checked here because the gateway refuses such a path before the API
 * could name the field.
 */
const PATH_ID = /^(?!\.{1,2}$)[\x21-\x24\x26-\x2E\x30-\x3A\x3C-\x5B\x5D-\x7E]{1,200}$/;

const idRule = (control, example) =>
  PATH_ID.test(control.value.trim()) ? null : [control, `Required: 1 to 200 visible ASCII characters without / \\ % or ; (and not . or ..), e.g. ${example}.`];
const required = (control, what) => (control.value.trim() === '' ? [control, `Required: ${what}.`] : null);

/** "Already exists" for an id a create would overwrite (the API's PUT creates or replaces). */
function exists(what, id) {
  const error = new Error(`${what} ${id} already exists`);
  error.status = 409;
  error.problem = { title: `${what} ${id} already exists`, detail: `Creating it would overwrite the existing ${what.toLowerCase()}; choose another id, or edit the existing one.` };
  return error;
}

/**
 * Creates with `PUT url` and `If-None-Match: *`: the API refuses (409) instead of replacing an object that exists,
 * also one another admin created a moment ago; that refusal is shown as "already exists".
 */
async function createOnly(url, body, what, id) {
  try {
    return await api(url, { method: 'PUT', body, headers: { 'if-none-match': '*' } });
  } catch (error) {
    // Refused as existing, or as created by a concurrent request a moment ago.
    if (error.status === 409 && /^(If-None-Match|The object was created concurrently)/.test(String(error.problem?.detail ?? ''))) throw exists(what, id);
    throw error;
  }
}

/** New user: userId, display name, enabled. `created(userId)` refreshes the list. */
export function userCreateForm(created) {
  const userId = textInput('userId', { required: true });
  const displayName = textInput('displayName');
  const enabled = checkbox('Enabled (can sign in)', 'enabled', true);
  return createForm({
    id: 'create-user',
    title: 'New user',
    parts: [h('div', { class: 'row' }, field('User id', userId), field('Display name (optional)', displayName)), enabled.element],
    controls: { userId, displayName, enabled: enabled.control },
    submitLabel: 'Create user',
    action: 'create users',
    permission: 'iam.admin.users:write',
    check: () => [idRule(userId, 'u-carol')].filter(Boolean),
    submit: async () => {
      const id = userId.value.trim();
      const name = displayName.value.trim();
      await createOnly(`/iam/admin/users/${seg(id)}`, { ...(name === '' ? {} : { displayName: name }), enabled: enabled.control.checked }, 'User', id);
      await created(id);
      return `User ${id} created.`;
    },
  });
}

/** New identity of `userId`: identity id, domain, enabled. `known()`: the user's identity ids (not overwritten). */
export function identityCreateForm(userId, known, created) {
  const identityId = textInput('identityId', { required: true });
  const identityDomain = textInput('identityDomain', { required: true });
  const enabled = checkbox('Identity enabled (can sign in)', 'enabled', true);
  return createForm({
    id: 'create-identity',
    title: `New identity of ${userId}`,
    parts: [h('div', { class: 'row' }, field('Identity id', identityId), field('Identity domain', identityDomain, 'e.g. example.com')), enabled.element],
    controls: { identityId, identityDomain, enabled: enabled.control },
    submitLabel: 'Create identity',
    action: 'create identities',
    permission: 'iam.admin.identities:write',
    check: () => [idRule(identityId, 'id-carol'), required(identityDomain, 'the identity domain, e.g. example.com')].filter(Boolean),
    submit: async () => {
      const id = identityId.value.trim();
      if (known().includes(id)) throw exists('Identity', id);
      // An identity of another user is refused by the API (409: it cannot be moved).
      // A plain PUT: an identity is never moved to another user (409 naming its owner, the more useful answer), and
      // one of this user's is caught by known() above.
      await api(`/iam/admin/identities/${seg(id)}`, { method: 'PUT', body: { userId, identityDomain: identityDomain.value.trim(), enabled: enabled.control.checked } });
      await created();
      return `Identity ${id} of ${userId} created.`;
    },
  });
}

/** One scope a line: `TYPE id [READ|WRITE]`; null for a line that is not one. */
function parseScope(line) {
  const parts = line.trim().split(/\s+/);
  if (parts.length < 2 || parts.length > 3) return null;
  const accessMode = (parts[2] ?? 'READ').toUpperCase();
  if (accessMode !== 'READ' && accessMode !== 'WRITE') return null;
  return { scopeType: parts[0], scopeRefId: parts[1], accessMode };
}

const lines = (control) => control.value.split('\n').map((line) => line.trim()).filter((line) => line !== '');
const commaList = (control) => [...new Set(control.value.split(',').map((item) => item.trim()).filter((item) => item !== ''))];

/** Fills the template select with `templates` (null: they cannot be read), keeping the choice when it is still there. */
function fillTemplates(select, templates) {
  const chosen = select.value;
  replace(
    select,
    h('option', { value: '' }, templates === null ? 'The templates cannot be read' : 'Choose a template…'),
    (templates ?? []).map((template) => h('option', { value: template.versionId, selected: template.versionId === chosen }, template.name && template.name !== template.versionId ? `${template.versionId} (${template.name})` : template.versionId)),
  );
}

/**
 * New profile of `userId`: id, name, template (a select filled from `templates`, the page's template list, refilled
 * when a template is created), client types, and unscoped or scopes (written after the profile, If-Match its
 * version).
 */
export function profileCreateForm(userId, templates, created) {
  const profileId = textInput('profileId', { required: true });
  const profileName = textInput('profileName', { required: true });
  const templateVersionId = h('select', { name: 'templateVersionId', required: true }, h('option', { value: '' }, 'Loading…'));
  const refill = (list) => list.then((value) => fillTemplates(templateVersionId, value), () => fillTemplates(templateVersionId, null));
  void refill(templates.get());
  templates.subscribe(refill);
  const clientTypes = textInput('clientTypes');
  clientTypes.defaultValue = 'WEB';
  const unscoped = checkbox('Unscoped (applies to every resource)', 'unscoped', false);
  const scopes = h('textarea', { name: 'scopes', rows: '3', spellcheck: 'false', autocomplete: 'off' });
  const form = createForm({
    id: 'create-profile',
    title: `New profile of ${userId}`,
    parts: [
      h('div', { class: 'row' }, field('Profile id', profileId), field('Profile name', profileName)),
      field('Template', templateVersionId, 'Its permission codes are what the profile grants; you can grant only what your own profile holds.'),
      field('Client types', clientTypes, 'Comma-separated, e.g. WEB, API.'),
      unscoped.element,
      field('Scopes', scopes, 'One a line: type, resource id and READ or WRITE, e.g. PROJECT 2 WRITE. Ignored when unscoped; none: the profile applies to no resource.'),
    ],
    controls: { profileId, profileName, templateVersionId, clientTypes, unscoped: unscoped.control, scopes, '': scopes },
    submitLabel: 'Create profile',
    action: 'create profiles',
    permission: 'iam.admin.profiles:write',
    check: () => {
      const wrong = [idRule(profileId, 'p-carol-reader'), required(profileName, 'a name, e.g. Reader on project 2'), required(templateVersionId, 'a template')];
      if (!unscoped.control.checked) {
        const bad = lines(scopes).findIndex((line) => parseScope(line) === null);
        if (bad !== -1) wrong.push([scopes, `Line ${bad + 1}: type, resource id and READ or WRITE, e.g. PROJECT 2 WRITE.`]);
      }
      return wrong.filter(Boolean);
    },
    submit: async () => {
      const id = profileId.value.trim();
      const isUnscoped = unscoped.control.checked;
      const wanted = isUnscoped ? [] : lines(scopes).map(parseScope);
      const body = {
        userId,
        profileName: profileName.value.trim(),
        templateVersionId: templateVersionId.value.trim(),
        clientTypes: commaList(clientTypes),
        enabled: true,
        revoked: false,
        unscoped: isUnscoped,
      };
      const answer = await createOnly(`/iam/admin/profiles/${seg(id)}`, body, 'Profile', id);
      if (wanted.length > 0) {
        try {
          await api(`/iam/admin/profiles/${seg(id)}/scopes`, { method: 'PUT', body: wanted, headers: { 'if-match': `"${answer.data.version}"` } });
        } catch (error) {
          // The profile exists, scoped with no resource (it grants nothing): listed, and the scopes' problem shown.
          await created();
          if (error.problem) error.problem = { ...error.problem, title: `Profile ${id} was created, but its scopes were not saved: ${error.problem.title}` };
          throw error;
        }
      }
      await created();
      return `Profile ${id} of ${userId} created.`;
    },
  });
  return form;
}

/** New template version: version id, name, description, permission codes (one a line). */
export function templateCreateForm(created) {
  const versionId = textInput('versionId', { required: true });
  const name = textInput('name', { required: true });
  const description = textInput('description');
  const permissions = h('textarea', { name: 'permissions', rows: '4', spellcheck: 'false', autocomplete: 'off' });
  return createForm({
    id: 'create-template',
    title: 'New template version',
    parts: [
      h('div', { class: 'row' }, field('Version id', versionId, 'e.g. reviewer-v1'), field('Template name', name)),
      field('Template description (optional)', description),
      field('Permissions', permissions, 'One permission code a line: resource:action, resource:* or *:*.'),
    ],
    controls: { versionId, name, description, permissions },
    submitLabel: 'Create template version',
    action: 'create templates',
    permission: 'iam.admin.templates:write',
    check: () => [idRule(versionId, 'reviewer-v1'), required(name, 'a name')].filter(Boolean),
    submit: async () => {
      const id = versionId.value.trim();
      const text = description.value.trim();
      const body = { name: name.value.trim(), ...(text === '' ? {} : { description: text }), permissions: [...new Set(lines(permissions))] };
      await createOnly(`/iam/admin/templates/${seg(id)}`, body, 'Template version', id);
      await created();
      return `Template version ${id} created.`;
    },
  });
}
