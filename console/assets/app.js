// The console's shell: client-side routing over real links (history.pushState + popstate), the navigation's
// aria-current, one page module per URL. Every console URL serves the same index.html.
import { h, replace } from './dom.js';
import { announce } from './status.js';
import { renderHome } from './home.js';
import { renderExplain } from './explain.js';
import { renderPolicy } from './policy.js';
import { renderSessions } from './sessions.js';
import { renderAccess } from './access.js';
import { renderAudit } from './audit.js';
import { renderMe } from './me.js';

const BASE = '/iam/console';

const PAGES = {
  '': { title: 'Console', render: renderHome },
  explain: { title: 'Explain', render: renderExplain },
  policy: { title: 'Policy', render: renderPolicy },
  sessions: { title: 'Sessions', render: renderSessions },
  access: { title: 'Access', render: renderAccess },
  audit: { title: 'Audit', render: renderAudit },
  me: { title: 'Me', render: renderMe },
};

/** The page name of a console path: '' for /iam/console, 'policy' for /iam/console/policy; null outside. */
function pageName(pathname) {
  const path = pathname.replace(/\/+$/, '');
  if (path === BASE) return '';
  if (!path.startsWith(`${BASE}/`)) return null;
  return path.slice(BASE.length + 1);
}

let generation = 0;

/** Goes to a console URL without reloading the page (a new history entry, or the current one replaced). */
export function navigate(url, { replaceEntry = false } = {}) {
  if (replaceEntry) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  void render(true);
}

function updateNav(name) {
  for (const link of document.querySelectorAll('#site-nav a')) {
    const linkName = pageName(new URL(link.href).pathname);
    if (linkName === name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

/** Renders the page of the current URL into a fresh container of `<main>`; `focus` moves focus to its heading. */
async function render(focus) {
  const main = document.getElementById('main');
  const name = pageName(location.pathname);
  const page = name === null ? undefined : PAGES[name];
  const current = ++generation;
  updateNav(name);
  // Each render writes into its own container: a slow answer for a page left meanwhile lands in a detached one.
  const root = h('div', { class: 'page' });
  replace(main, root);
  announce('');
  const context = {
    root,
    params: new URLSearchParams(location.search),
    navigate,
    isCurrent: () => current === generation,
    /** Sets the document title and writes the page's one `<h1>`. */
    heading(text) {
      document.title = `${text} — IAM console`;
      const heading = h('h1', { tabindex: '-1' }, text);
      root.append(heading);
      if (focus) heading.focus();
      return heading;
    },
  };
  if (!page) {
    context.heading('Page not found');
    root.append(h('p', null, 'The console has no such page. ', h('a', { href: BASE }, 'Go to the console start page'), '.'));
    return;
  }
  await page.render(context);
}

/** Same-origin console links are followed in place; anything else (other paths, new tabs, downloads) as usual. */
document.addEventListener('click', (event) => {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const link = event.target instanceof Element ? event.target.closest('a[href]') : null;
  if (!link || (link.target && link.target !== '_self') || link.hasAttribute('download')) return;
  const url = new URL(link.href);
  if (url.origin !== location.origin || pageName(url.pathname) === null) return;
  event.preventDefault();
  if (url.pathname + url.search === location.pathname + location.search && !url.hash) return;
  navigate(url.pathname + url.search);
});

window.addEventListener('popstate', () => {
  void render(true);
});

void render(false);
