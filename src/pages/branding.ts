import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { AppError } from '../errors.js';
import type { PageBrand } from '../plugins/views.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { brandPalette, type BrandPalette } from '../shared/brand-colours.js';
import { type App, findApp } from '../storage/repos/apps.js';

/**
 * Per-app branding of the hosted pages (the app's `logo_url` and `accent_color`, validated when the
 * developer API writes them). The accent colour reaches the page only through a served stylesheet
 * built from the stored `#rrggbb` value (CSP `style-src 'self'` allows no inline style), with a text
 * colour on it chosen for contrast.
 */

const HEX = /^#[0-9a-f]{6}$/i;

/** The brand stylesheet: the palette as gatehouse.css's variables, for each scheme. */
export function brandStylesheet(accent: string): string {
  const { light, dark } = brandPalette(accent);
  const vars = (p: BrandPalette['light']) => `--accent: ${p.accent}; --accent-contrast: ${p.accentContrast}; --link: ${p.link}; --focus: ${p.focus};`;
  return `:root { ${vars(light)} }\n@media (prefers-color-scheme: dark) { :root { ${vars(dark)} } }\n`;
}

/** What a page shows of the app the sign-in is for (undefined for none). */
export function brandOf(app: App | undefined): PageBrand | undefined {
  if (!app || app.disabled) return undefined;
  const { logoUrl, logoUrlDark, accentColor } = app.branding;
  return {
    name: app.name,
    logoUrl,
    logoUrlDark: logoUrl ? logoUrlDark : null,
    // The version makes a changed colour show at once despite caching.
    stylesheet: accentColor ? `/assets/brand/${encodeURIComponent(app.id)}.css?v=${app.updatedAt}` : null,
  };
}

const BrandParams = z.object({ file: z.string().max(210).regex(/^[A-Za-z0-9_-]+\.css$/) });

export default async function brandingRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  app.get('/assets/brand/:file', { schema: { params: BrandParams } }, async (request, reply) => {
    const found = await findApp(app.db, request.params.file.slice(0, -'.css'.length));
    const accent = found?.branding.accentColor;
    if (!found || found.disabled || !accent || !HEX.test(accent)) throw new AppError('not_found');
    const css = brandStylesheet(accent);
    return reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=300').send(css);
  });
}
