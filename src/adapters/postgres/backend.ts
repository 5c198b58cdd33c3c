import { defineDatabase } from '../backend-registration';

/** `database.url` set: a PostgreSQL server the operator runs, shared by every instance and command. */
export const POSTGRES_DATABASE = defineDatabase({
  kind: 'postgres',
  chosenBy: { schemes: ['postgres:', 'postgresql:'] },
  urlForms: 'a postgres:// or postgresql:// URL',
  checkUrl(url) {
    if (!URL.canParse(url) || new URL(url).host === '') throw new Error('the PostgreSQL URL has no host');
  },
  capabilities: { shared: true },
  async open({ url }) {
    // Loaded here, not at the top: the configuration reads this file to check a URL, without the ORM.
    const { namingTheDatabase } = await import('./connection-failure');
    return { url: url!, singleConnection: false, explain: (error) => namingTheDatabase(error, url!), stop: () => Promise.resolve() };
  },
});
