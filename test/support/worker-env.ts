/**
 * Jest `setupFiles` of the integration project: in each worker, DATABASE_URL names that worker's own database
 * (global-setup.ts), so a test that reads the environment, or a gateway or CLI started with it, can never reach
 * another worker's database.
 */
import { testDatabaseKind, testDatabaseUrl } from './env';

if (testDatabaseKind() === 'postgres') process.env.DATABASE_URL = testDatabaseUrl();
