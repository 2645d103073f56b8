import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { AppError } from '../errors.js';
import type { PageBrand } from '../plugins/views.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { type App, findApp } from '../storage/repos/apps.js';

/**
 * Per-app branding of the hosted pages (the app's `logo_url` and `accent_color`, validated when the
 * developer API writes them). The accent colour reaches the page only through a served stylesheet
 * built from the stored `#rrggbb` value (CSP `style-src 'self'` allows no inline style), with a text
 * colour on it chosen for contrast.
 */

const HEX = /^#[0-9a-f]{6}$/i;

/** WCAG relative luminance of `#rrggbb`. */
function luminance(hex: string): number {
  const channel = (i: number) => {
    const c = parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
}

/** WCAG contrast ratio of two `#rrggbb` colours. */
function contrastRatio(a: string, b: string): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}

/** The text colour on an accent background: white or near-black, whichever contrasts more (always ≥ 4.5:1). */
function textOn(accent: string): string {
  return contrastRatio(accent, '#ffffff') >= contrastRatio(accent, '#111111') ? '#ffffff' : '#111111';
}

/** What a page shows of the app the sign-in is for (undefined for none). */
export function brandOf(app: App | undefined): PageBrand | undefined {
  if (!app || app.disabled) return undefined;
  const { logoUrl, accentColor } = app.branding;
  return {
    name: app.name,
    logoUrl,
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
    const css = `:root { --accent: ${accent}; --accent-contrast: ${textOn(accent)}; }\n`;
    return reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=300').send(css);
  });
}
