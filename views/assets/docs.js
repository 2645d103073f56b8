// Starts Swagger UI on /docs. A file, not an inline script: the page's CSP allows scripts from 'self' only.
// validatorUrl null: no badge fetched from validator.swagger.io (no third-party requests).
window.SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  validatorUrl: null,
  deepLinking: true,
  docExpansion: 'list',
  defaultModelsExpandDepth: 0,
});
