/**
 * #11.30 with #11.12: a method a specific route does not list falls through only to a rule that checks at
 * least as much, and "as much" includes the valid-active-profile requirement of routes without a permission.
 */
import type { CompiledRoute } from '../../src/policy/compiled-policy';
import { coversRoute } from '../../src/policy/route-strictness';

const route = (overrides: Partial<CompiledRoute>): { route: CompiledRoute; resourceSegment: number } => ({
  route: {
    id: 'routes.yaml:1',
    source: { file: 'routes.yaml', line: 1 },
    methods: ['GET'],
    pattern: '/x',
    public: false,
    permission: null,
    resource: null,
    mode: 'enforce',
    ...overrides,
  },
  resourceSegment: -1,
});

describe('#11.30 coversRoute and profile: optional', () => {
  it('a session-and-profile route is not covered by a broader route that waives the profile', () => {
    expect(coversRoute(route({ pattern: '/**', profile: 'optional' }), route({}))).toBe(false);
  });

  it('it is covered by a broader route that needs the profile, or a permission (which needs one)', () => {
    expect(coversRoute(route({ pattern: '/**' }), route({}))).toBe(true);
    expect(coversRoute(route({ pattern: '/**', profile: 'optional', permission: 'x:read' }), route({}))).toBe(true);
  });

  it('a route that itself waives the profile is covered by any enforced, non-public route', () => {
    expect(coversRoute(route({ pattern: '/**', profile: 'optional' }), route({ profile: 'optional' }))).toBe(true);
    expect(coversRoute(route({ pattern: '/**', public: true }), route({ profile: 'optional' }))).toBe(false);
  });
});
