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
export function contrastRatio(a: string, b: string): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}

/** The text colour on an accent background: white or black, whichever contrasts more (for any colour at least 4.58:1). */
function textOn(accent: string): string {
  return contrastRatio(accent, '#ffffff') >= contrastRatio(accent, '#000000') ? '#ffffff' : '#000000';
}

/** The page's card colour in each scheme (gatehouse.css `--card`): what links and focus rings sit on. */
const CARD = { light: '#ffffff', dark: '#161a22' } as const;

/** `hex` mixed with `toward` by `share` (0–1), as `#rrggbb`. */
function mix(hex: string, toward: string, share: number): string {
  const c = (h: string, i: number) => parseInt(h.slice(i, i + 2), 16);
  return `#${[1, 3, 5].map((i) => Math.round(c(hex, i) + (c(toward, i) - c(hex, i)) * share).toString(16).padStart(2, '0')).join('')}`;
}

/** `hex`, darkened (toward black) or lightened (toward white) in 5% steps until it contrasts `ratio`:1 with `background`. */
function readableOn(hex: string, background: string, ratio: number): string {
  const toward = luminance(background) > 0.5 ? '#000000' : '#ffffff';
  for (let share = 0; share <= 1; share += 0.05) {
    const candidate = mix(hex, toward, share);
    if (contrastRatio(candidate, background) >= ratio) return candidate;
  }
  return toward;
}

export interface BrandPalette {
  light: { accent: string; accentContrast: string; link: string; focus: string };
  dark: { accent: string; accentContrast: string; link: string; focus: string };
}

/**
 * The colours an app's accent gives a page, in both schemes: its buttons in the accent itself (text
 * chosen for contrast), its links and secondary buttons in the accent made readable on the card
 * (WCAG AA text, 4.5:1), its focus rings visible on the card (3:1, non-text). Table-tested.
 */
export function brandPalette(accent: string): BrandPalette {
  const scheme = (card: string) => ({ accent, accentContrast: textOn(accent), link: readableOn(accent, card, 4.5), focus: readableOn(accent, card, 3) });
  return { light: scheme(CARD.light), dark: scheme(CARD.dark) };
}

/** The brand stylesheet: the palette as gatehouse.css's variables, for each scheme. */
export function brandStylesheet(accent: string): string {
  const { light, dark } = brandPalette(accent);
  const vars = (p: BrandPalette['light']) => `--accent: ${p.accent}; --accent-contrast: ${p.accentContrast}; --link: ${p.link}; --focus: ${p.focus};`;
  return `:root { ${vars(light)} }\n@media (prefers-color-scheme: dark) { :root { ${vars(dark)} } }\n`;
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
    const css = brandStylesheet(accent);
    return reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=300').send(css);
  });
}
