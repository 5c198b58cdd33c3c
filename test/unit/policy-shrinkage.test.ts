import { compilePolicyFiles } from '../../src/policy/load-policy-directory';
import { shrunkFiles } from '../../src/policy/policy-shrinkage';

const compile = (files: Record<string, string>) => compilePolicyFiles(Object.entries(files).map(([file, text]) => ({ file, text }))).policy!;
const routes = (...paths: string[]): string => `version: 1\nroutes:\n${paths.map((path) => `  - { path: ${path}, methods: [GET], public: true }\n`).join('')}`;

describe('shrunkFiles', () => {
  it('names files that lost routes, lost more than half their bytes, or are gone', () => {
    const before = compile({ 'a.yaml': routes('/a', '/b'), 'b.yaml': `# ${'commentary '.repeat(40)}\n${routes('/c')}`, 'c.yaml': routes('/d'), 'd.yaml': routes('/e') });
    const after = compile({ 'a.yaml': routes('/a'), 'b.yaml': routes('/c'), 'd.yaml': routes('/e', '/f') });
    expect(shrunkFiles(before, after).map(({ file, routesBefore, routesAfter }) => [file, routesBefore, routesAfter])).toEqual([
      ['a.yaml', 2, 1],
      ['b.yaml', 1, 1],
      ['c.yaml', 1, 0],
    ]);
    expect(shrunkFiles(before, after).find((file) => file.file === 'c.yaml')?.bytesAfter).toBe(0);
  });

  it('is empty when nothing shrank', () => {
    const before = compile({ 'a.yaml': routes('/a') });
    expect(shrunkFiles(before, compile({ 'a.yaml': routes('/a', '/b') }))).toEqual([]);
    expect(shrunkFiles(before, before)).toEqual([]);
  });
});
