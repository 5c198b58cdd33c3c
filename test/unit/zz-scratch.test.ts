import { compilePolicyFiles } from '../../src/policy';
it('prints', () => {
  const r = compilePolicyFiles([{ file: 'p.yaml', text: 'version: 1\ndefault: ~\nroutes:\n  - path: /a/:id\n    mode: ~\n    permission:\n    methods: ~\n    resource: { type: A, id: id, access: ~ }\n' }]);
  console.log(JSON.stringify(r.issues), JSON.stringify(r.policy?.routes));
});
