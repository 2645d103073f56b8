/**
 * The module rule (docs/architecture/modules.md), checked on every `npm test`
 * (test/foundation/module-boundaries.test.ts). Paths are relative to the repository root.
 */
const CORE = '^src/(shared|storage|plugins)/|^src/(errors|config|node-flags)[.]ts$';
const SERVICES = '^src/(sign-in|tokens|throttle|mail)/';
const ENTRY = '^src/(app|server|cluster|cli|bootstrap)[.]ts$|^src/(cli|openapi)/';

module.exports = {
  forbidden: [
    {
      name: 'core-uses-core-only',
      comment: 'shared/, storage/, plugins/, errors.ts and config.ts are under every feature: they import none.',
      severity: 'error',
      from: { path: CORE },
      to: { path: '^src/', pathNot: [CORE] },
    },
    {
      name: 'services-use-core-and-services',
      comment: 'sign-in/, tokens/, throttle/ and mail/ serve several doors: they import the core and each other, never a feature.',
      severity: 'error',
      from: { path: SERVICES },
      to: { path: '^src/', pathNot: [CORE, SERVICES] },
    },
    {
      name: 'features-meet-through-public-faces',
      comment: "A feature uses another feature only through that feature's index.ts (its public face).",
      severity: 'error',
      from: { path: '^src/([^/]+)/', pathNot: [CORE, SERVICES, ENTRY] },
      to: { path: '^src/[^/]+/', pathNot: ['^src/$1/', CORE, SERVICES, '^src/[^/]+/index[.]ts$'] },
    },
    {
      name: 'only-entry-points-wire-the-app',
      comment: 'app.ts, server.ts, cluster.ts, the CLI and the OpenAPI generator assemble the app; nothing else imports them.',
      severity: 'error',
      from: { path: '^src/', pathNot: [ENTRY] },
      to: { path: ENTRY },
    },
    {
      name: 'migrations-are-frozen',
      comment: 'A migration never imports application code: it must run the same way in every later version.',
      severity: 'error',
      from: { path: '^migrations/' },
      to: { path: '^src/' },
    },
    {
      name: 'sources-do-not-import-tests',
      severity: 'error',
      from: { path: '^(src|migrations)/' },
      to: { path: '^(test|bench)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
