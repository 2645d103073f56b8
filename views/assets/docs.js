// Starts Swagger UI on /docs. A file, not an inline script: the page's CSP allows scripts from 'self' only.
// validatorUrl null: no badge fetched from validator.swagger.io (no third-party requests).
// docExpansion 'none': the tags open one at a time. With every tag open, Swagger UI 5 stops rendering
// a document of more than about 140 operations after the first few (test/openapi/docs-page.test.ts).
window.SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  validatorUrl: null,
  deepLinking: true,
  docExpansion: 'none',
  defaultModelsExpandDepth: 0,
});
