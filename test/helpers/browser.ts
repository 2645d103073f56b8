import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

/** Debian's Chromium, where the browser tests run (skipped when it is missing). */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const haveChromium = existsSync(CHROMIUM_PATH);

/** Headless Chromium with the flags every browser test uses. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
}

/** The colour schemes and widths the accessibility tests check each page in: desktop and a 390 px phone, light and dark. */
export const SCHEME_AND_WIDTHS = [
  { scheme: 'light', width: 1280, height: 800 },
  { scheme: 'dark', width: 1280, height: 800 },
  { scheme: 'light', width: 390, height: 844 },
  { scheme: 'dark', width: 390, height: 844 },
] as const;
