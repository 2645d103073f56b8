/**
 * What the event loop needs of legal Markdown: the cheap, linear nesting check it runs before a document
 * is sent to the render worker (`renderer.ts`), and the shape of the worker's answer. It imports no
 * Markdown or HTML library: those load only in the worker (`markdown.ts`).
 */

/** Deepest block-quote/list nesting a document may use (real legal texts stay under 6). */
export const MAX_NESTING = 20;

export type RenderOutcome = { ok: true; html: string } | { ok: false; problem: string };

export const nestingProblem = `block quotes and lists must not be nested more than ${MAX_NESTING} levels deep`;

// Sticky, multiline: matched in place at a position of the whole document (no per-line copies).
const CONTAINER_MARKER = / {0,3}(?:>|[-+*](?=[ \t]|$)|\d{1,9}[.)](?=[ \t]|$))[ \t]*/my;
const THEMATIC_BREAK = / {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/my;

/**
 * Cheap upper bound (linear, safe on the event loop) of the block quotes and list items opened by the
 * markers at the start of one line (`> > - 1. text`), over all lines. Indentation-only nesting is
 * measured exactly on the lexed tokens, in the worker.
 */
export function markerNesting(markdown: string): number {
  let deepest = 0;
  let start = 0;
  while (start < markdown.length) {
    let at = start;
    let depth = 0;
    for (;;) {
      CONTAINER_MARKER.lastIndex = at;
      const m = CONTAINER_MARKER.exec(markdown);
      if (!m) break;
      // `- - -` / `* * *` is a horizontal rule, not three nested lists.
      if (m[0].trimStart()[0] !== '>') {
        THEMATIC_BREAK.lastIndex = at;
        if (THEMATIC_BREAK.test(markdown)) break;
      }
      depth += 1;
      if (depth > MAX_NESTING) return depth;
      at += m[0].length;
    }
    if (depth > deepest) deepest = depth;
    const end = markdown.indexOf('\n', start);
    if (end === -1) break;
    start = end + 1;
  }
  return deepest;
}
