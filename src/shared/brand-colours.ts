/**
 * The colours an app's accent colour gives what Gatehouse shows for it (hosted pages, mails): pure
 * WCAG arithmetic, table-tested in test/foundation/brand-colours.test.ts.
 */

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
