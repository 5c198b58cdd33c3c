// A small DOM helper: elements are built with createElement and textContent, never innerHTML, so no value from the
// API can become markup.

/**
 * `h('a', { href: '/x', class: 'link' }, 'text', child)`: an element with attributes and children. An attribute
 * `on<Event>` with a function adds a listener; `false`/`null`/`undefined` attributes are left out, `true` ones are
 * set empty. Children may be strings, numbers, nodes, arrays of them, or null/false (skipped).
 */
export function h(tag, attrs, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') element.addEventListener(name.slice(2).toLowerCase(), value);
    else if (name === 'value' && 'value' in element) element.value = String(value);
    else if (name === 'checked' || name === 'selected') element[name] = Boolean(value);
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  append(element, children);
  return element;
}

/** Appends children (see {@link h}) to `parent`. */
export function append(parent, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return parent;
}

/** Replaces every child of `parent`. */
export function replace(parent, ...children) {
  parent.replaceChildren();
  return append(parent, children);
}

/** Formats an ISO timestamp in the viewer's locale (the title keeps the exact value); '—' for none. */
export function when(iso) {
  if (!iso) return '—';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return h('time', { datetime: iso, title: iso }, date.toLocaleString());
}

/** A table in a horizontally scrolling wrapper: `columns` are header texts, `rows` arrays of cells (or `tr`s). */
export function table(caption, columns, rows, options = {}) {
  return h(
    'div',
    { class: 'table-scroll', tabindex: '0', role: 'region', 'aria-label': caption },
    h(
      'table',
      { class: options.className },
      h('caption', { class: options.showCaption ? null : 'visually-hidden' }, caption),
      h('thead', null, h('tr', null, columns.map((column) => h('th', { scope: 'col' }, column)))),
      h('tbody', null, rows.map((row) => (row instanceof Node ? row : h('tr', null, row.map((cell) => h('td', null, cell)))))),
    ),
  );
}

let fieldCount = 0;

/**
 * A labelled control: `<label for>` + the control (an element made with {@link h}), and an optional hint tied to it
 * with aria-describedby. Returns the wrapper; the caller keeps the control.
 */
export function field(label, control, hint) {
  if (!control.id) control.id = `field-${++fieldCount}`;
  const hintElement = hint ? h('p', { class: 'hint', id: `${control.id}-hint` }, hint) : null;
  if (hintElement) control.setAttribute('aria-describedby', hintElement.id);
  return h('div', { class: 'field' }, h('label', { for: control.id }, label), control, hintElement);
}

/**
 * Shows `message` as the error of `control` (next to it, tied with aria-describedby, aria-invalid set); null clears it.
 */
export function fieldError(control, message) {
  const id = `${control.id}-error`;
  document.getElementById(id)?.remove();
  const describedBy = (control.getAttribute('aria-describedby') ?? '').split(' ').filter((token) => token && token !== id);
  if (message === null) {
    control.removeAttribute('aria-invalid');
  } else {
    control.setAttribute('aria-invalid', 'true');
    control.after(h('p', { class: 'field-error', id }, message));
    describedBy.push(id);
  }
  if (describedBy.length > 0) control.setAttribute('aria-describedby', describedBy.join(' '));
  else control.removeAttribute('aria-describedby');
}

/** `<dl>` of [term, value] pairs (null values are skipped). */
export function facts(pairs) {
  return h(
    'dl',
    { class: 'facts' },
    pairs.filter(([, value]) => value !== null && value !== undefined).map(([term, value]) => [h('dt', null, term), h('dd', null, value)]),
  );
}

/** A small badge: `kind` is ok, bad, warn or neutral. */
export const badge = (text, kind = 'neutral') => h('span', { class: `badge badge-${kind}` }, text);

/** A button; `onClick` may be async (the button is disabled while it runs). */
export function button(label, onClick, attrs = {}) {
  const element = h('button', { type: 'button', ...attrs });
  element.textContent = label;
  element.addEventListener('click', async (event) => {
    if (element.disabled) return;
    element.disabled = true;
    try {
      await onClick(event);
    } finally {
      element.disabled = false;
    }
  });
  return element;
}

/**
 * A destructive action in two steps: the first button shows "Confirm" and "Cancel" next to it (no window.confirm);
 * Confirm runs `action`.
 */
export function confirmButton(label, confirmLabel, action, attrs = {}) {
  const box = h('span', { class: 'confirm' });
  const first = button(label, () => {
    replace(box, h('span', { class: 'confirm-question' }, `${label}?`), ' ', confirm, ' ', cancel);
    confirm.focus();
  }, attrs);
  const confirm = button(confirmLabel, async () => {
    await action();
  }, { class: 'danger', 'aria-label': `${confirmLabel}: ${attrs['aria-label'] ?? label}` });
  const cancel = button('Cancel', () => {
    replace(box, first);
    first.focus();
  });
  replace(box, first);
  return box;
}
