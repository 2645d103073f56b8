import { dayOf } from '../legal/index.js';
import type { LegalViewCount } from '../storage/repos/legal.js';

export interface ViewChart {
  width: number;
  height: number;
  total: number;
  max: number;
  bars: Array<{ x: number; y: number; width: number; height: number; day: string; count: number }>;
}

const DAYS = 30;
const WIDTH = 600;
const HEIGHT = 120;

/**
 * Views per day over the last 30 days (all documents and versions together), as bar geometry for a
 * server-rendered SVG: no script, and the numbers are in the page as text too (the table beside it).
 */
export function viewChart(views: LegalViewCount[], now: number): ViewChart {
  const perDay = new Map<string, number>();
  for (const v of views) perDay.set(v.day, (perDay.get(v.day) ?? 0) + v.count);
  const days = Array.from({ length: DAYS }, (_, i) => dayOf(now - (DAYS - 1 - i) * 86_400));
  const max = Math.max(1, ...days.map((d) => perDay.get(d) ?? 0));
  const slot = WIDTH / DAYS;
  const bars = days.map((day, i) => {
    const count = perDay.get(day) ?? 0;
    const height = Math.round((count / max) * (HEIGHT - 4));
    return { x: Math.round(i * slot + 1), y: HEIGHT - height, width: Math.max(1, Math.round(slot - 2)), height, day, count };
  });
  return { width: WIDTH, height: HEIGHT, total: bars.reduce((sum, b) => sum + b.count, 0), max, bars };
}
