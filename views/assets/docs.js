// Starts Swagger UI on /docs. A file, not an inline script: the page's CSP allows scripts from 'self' only.
// validatorUrl null: no badge fetched from validator.swagger.io (no third-party requests).
// deepLinking off: Swagger UI puts the deep link (an <a>) inside each operation's summary button, which
// nests one control in another for keyboard and screen-reader users (axe nested-interactive).
// docExpansion 'none': the tags open one at a time. With every tag open, Swagger UI 5 stops rendering
// a document of more than about 140 operations after the first few (test/openapi/docs-page.test.ts).
window.SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  validatorUrl: null,
  deepLinking: false,
  docExpansion: 'none',
  defaultModelsExpandDepth: 0,
  // The server picker has no label of its own.
  onComplete: () => document.getElementById('servers')?.setAttribute('aria-label', 'Server'),
});
