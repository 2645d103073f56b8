import type { FastifyInstance } from 'fastify';
import { renderPage } from '../plugins/views.js';
import { developerLinks } from '../shared/dev-links.js';
import { html } from '../shared/responses.js';

/**
 * `GET /` outside production (issue 15): a landing page for the developer who just ran `npm start`,
 * linking the console, the demo, the dev mailbox, discovery and the API reference (the same list the
 * first-start banner prints). Server-rendered, no script. Production keeps answering `/` with the JSON
 * 404: a public issuer has no home page to show, and an API client probing `/` expects JSON.
 */
export default async function homeRoutes(app: FastifyInstance) {
  const links = developerLinks(app.config);
  app.get(
    '/',
    {
      config: { errorStyle: 'html' },
      schema: {
        operationId: 'developmentHome',
        tags: ['development'],
        summary: 'The development landing page',
        description: 'Only outside production (there `/` answers 404 `not_found`). Links the console, the demo, the dev mailbox, discovery and `/docs`.',
        response: { 200: html('The landing page.') },
      },
    },
    async (request, reply) => renderPage(request, reply, 'home', { titleKey: 'home.title', links, issuer: app.config.baseUrl }),
  );
}
