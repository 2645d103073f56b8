import { describe, expect, it } from 'vitest';
import { brandPalette, contrastRatio } from '../../src/shared/brand-colours.js';

// The colours an app's accent gives the hosted pages (docs: the branding section of the console):
// whatever the developer picks, text stays readable (4.5:1) and focus rings visible (3:1) on the
// card of either colour scheme.
const CARD = { light: '#ffffff', dark: '#161a22' };
const ACCENTS = ['#2457d6', '#0a7f3f', '#ffeb3b', '#777777', '#000000', '#ffffff', '#ff00ff', '#00ffff', '#7f1d1d', '#fde68a'];

describe('brandPalette', () => {
  for (const accent of ACCENTS) {
    it(`${accent}: readable buttons, links and focus rings in both schemes`, () => {
      const palette = brandPalette(accent);
      for (const scheme of ['light', 'dark'] as const) {
        const p = palette[scheme];
        expect(p.accent).toBe(accent);
        expect(contrastRatio(p.accentContrast, p.accent), `${scheme} button text`).toBeGreaterThanOrEqual(4.5);
        expect(contrastRatio(p.link, CARD[scheme]), `${scheme} link`).toBeGreaterThanOrEqual(4.5);
        expect(contrastRatio(p.focus, CARD[scheme]), `${scheme} focus ring`).toBeGreaterThanOrEqual(3);
      }
    });
  }

  it('keeps an accent that is already readable, and only darkens or lightens what is not', () => {
    expect(brandPalette('#1d4ed8').light.link).toBe('#1d4ed8');
    expect(brandPalette('#ffeb3b').light.link).not.toBe('#ffeb3b');
    expect(brandPalette('#93b4ff').dark.link).toBe('#93b4ff');
  });
});
