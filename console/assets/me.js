// /iam/console/me: my principal and my profiles (the active one marked); switch profile; sign out.
import { api, seg } from './api.js';
import { badge, button, facts, h, replace, table } from './dom.js';
import { problemView } from './problems.js';
import { announce } from './status.js';

const scopeText = (profile) =>
  profile.unscoped ? 'every resource' : profile.scopes.length === 0 ? 'no resource' : profile.scopes.map((scope) => `${scope.scopeType} ${scope.scopeRefId} (${scope.accessMode})`).join(', ');

export async function renderMe({ root, heading, isCurrent }) {
  heading('Me');
  const message = h('div');
  const principalSection = h('section', { 'aria-labelledby': 'principal-heading' }, h('h2', { id: 'principal-heading' }, 'Signed in as'), h('p', { class: 'muted' }, 'Loading…'));
  const profilesSection = h('section', { 'aria-labelledby': 'profiles-heading' }, h('h2', { id: 'profiles-heading' }, 'My profiles'), h('p', { class: 'muted' }, 'Loading…'));
  // With OpenID Connect the page names the gateway's OIDC logout: it ends the session here, then sends the browser to
  // the provider's end_session_endpoint, so the provider's session does not sign the user straight back in.
  const viaProvider = document.body.dataset.signOut;
  const signOut = button('Sign out', async () => {
    if (viaProvider) {
      location.assign(viaProvider);
      return;
    }
    try {
      await api('/iam/auth/logout', { method: 'POST' });
      announce('Signed out.');
      location.assign('/iam/login?returnTo=%2Fiam%2Fconsole');
    } catch (error) {
      replace(message, problemView(error));
    }
  });
  root.append(message, principalSection, profilesSection, h('section', { 'aria-labelledby': 'sign-out-heading' }, h('h2', { id: 'sign-out-heading' }, 'Sign out'), h('p', null, viaProvider ? 'Ends this session on every gateway instance, then at your identity provider.' : 'Ends this session on every gateway instance.'), h('p', null, signOut)));

  const load = async () => {
    const [me, profiles] = await Promise.allSettled([api('/iam/auth/me'), api('/iam/authorization/profiles')]);
    if (!isCurrent()) return;
    const active = me.status === 'fulfilled' ? me.value.data.activeProfileId : null;
    if (me.status === 'rejected') {
      replace(principalSection, h('h2', { id: 'principal-heading' }, 'Signed in as'), problemView(me.reason));
    } else {
      const principal = me.value.data;
      replace(
        principalSection,
        h('h2', { id: 'principal-heading' }, 'Signed in as'),
        facts([
          ['Name', principal.displayName ?? '—'],
          ['User id', h('code', null, principal.userId)],
          ['Identity', h('span', null, h('code', null, principal.identityId), ' at ', h('code', null, principal.identityDomain))],
          ['Active profile', principal.activeProfileId ? h('code', { class: 'active-profile' }, principal.activeProfileId) : 'none'],
          ['Authorization version', String(principal.authorizationVersion)],
        ]),
      );
    }
    if (profiles.status === 'rejected') {
      replace(profilesSection, h('h2', { id: 'profiles-heading' }, 'My profiles'), problemView(profiles.reason));
      return;
    }
    replace(
      profilesSection,
      h('h2', { id: 'profiles-heading' }, 'My profiles'),
      profiles.value.data.length === 0
        ? h('p', null, 'No profile is available to you.')
        : table(
            'My profiles',
            ['Profile', 'Id', 'Client types', 'Applies to', 'Action'],
            profiles.value.data.map((profile) =>
              h(
                'tr',
                { 'data-profile-id': profile.profileId, class: profile.profileId === active ? 'current' : null },
                h('td', null, profile.profileName),
                h('td', null, h('code', null, profile.profileId)),
                h('td', null, profile.clientTypes.join(', ')),
                h('td', null, scopeText(profile)),
                h(
                  'td',
                  null,
                  profile.profileId === active
                    ? badge('active', 'info')
                    : button('Switch', () => switchTo(profile), { 'aria-label': `Switch to ${profile.profileName}` }),
                ),
              ),
            ),
          ),
    );
  };

  // For a cookie session the gateway answers the switch with Set-Cookie carrying the new session: reloading the
  // principal shows the new active profile.
  const switchTo = async (profile) => {
    try {
      await api(`/iam/authorization/profiles/${seg(profile.profileId)}/switch`, { method: 'POST' });
      replace(message);
      await load();
      announce(`Switched to ${profile.profileName}.`);
    } catch (error) {
      replace(message, problemView(error));
    }
  };

  await load();
}
