// ESLint (flat config): `npm run lint:eslint`. @eslint/js recommended everywhere; typescript-eslint's
// type-checked recommended set on the TypeScript files (src, test, examples, migrations: tsconfig.json).
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['dist/**', 'coverage/**', '.data/**', 'bench/results/**'] },
  { linterOptions: { reportUnusedDisableDirectives: 'error' } },
  js.configs.recommended,
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // `const { version: _version, ...rest } = record` is how the code drops a property.
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true }],
      // Promise-returning interface methods are `async` so that a throw becomes a rejection; dropping
      // `async` where nothing is awaited would change that.
      '@typescript-eslint/require-await': 'off',
      // `list[i]!` / `as string` mark elements that may be absent; the tsconfig has no noUncheckedIndexedAccess,
      // so the rule calls them unnecessary (they compile to nothing either way).
      '@typescript-eslint/no-unnecessary-type-assertion': 'off',
    },
  },
  {
    files: ['src/**/*.ts'],
    rules: {
      // The gateway reports through its logger and the CLI writes to the streams it is given.
      'no-console': 'error',
    },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      // Response bodies (supertest, fetch().json()) and parsed YAML are `any`; tests assert on their shape.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { ...globals.node } },
  },
  {
    files: ['**/*.mjs'],
    languageOptions: { sourceType: 'module', globals: { ...globals.node } },
  },
  {
    // The console (/iam/console): plain ES modules run by the browser as they are (no build step, no bundler).
    files: ['console/assets/**/*.js'],
    languageOptions: { sourceType: 'module', globals: { ...globals.browser } },
  },
);
