/** The text outside fenced code blocks, where a `#` line is no heading and a `[x](y)` no link. */
export const unfenced = (text: string) => text.replace(/^```[\s\S]*?^```/gm, '');

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2… */
export function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of unfenced(text).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = heading!.replace(/`/g, '').trim().toLowerCase().replace(/[^\p{L}\p{N}\- _]/gu, '').replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}
