import { marked, type Token } from 'marked';
import sanitizeHtml from 'sanitize-html';

/**
 * Legal Markdown → sanitized HTML, with limits (SECURITY hardening item 5). Pure and synchronous: it
 * runs inside the render worker (`render-worker.ts`), never on the event loop, because marked's
 * inline parser is super-linear on hostile input (57 kB of `*a_` takes ~40 s) and its block parser
 * recurses once per nesting level (29,000 `> ` overflow the stack). The worker adds the time limit.
 */

/** Deepest block-quote/list nesting a document may use (real legal texts stay under 6). */
export const MAX_NESTING = 20;
/** Largest HTML a document may render to, before sanitizing (reference links can multiply the input). */
export const HTML_MAX = 1_000_000;

export type RenderOutcome = { ok: true; html: string } | { ok: false; problem: string };

export const nestingProblem = `block quotes and lists must not be nested more than ${MAX_NESTING} levels deep`;

const SANITIZE: sanitizeHtml.IOptions = {
  allowedTags: [
    'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'p', 'a', 'ul', 'ol', 'li', 'blockquote', 'code', 'pre', 'em', 'strong', 'del',
    'hr', 'br', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'sup', 'sub', 'dl', 'dt', 'dd', 'abbr',
  ],
  allowedAttributes: { a: ['href', 'title', 'rel'], abbr: ['title'], th: ['align'], td: ['align'], ol: ['start'] },
  allowedSchemes: ['http', 'https', 'mailto'],
  allowedSchemesAppliedToAttributes: ['href'],
  allowProtocolRelative: false,
  disallowedTagsMode: 'discard',
  transformTags: { a: sanitizeHtml.simpleTransform('a', { rel: 'noopener noreferrer nofollow' }) },
};

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

/** Deepest block-quote/list nesting of lexed tokens (iterative: no recursion on hostile depth). */
export function tokenNesting(tokens: Token[]): number {
  let deepest = 0;
  const stack: Array<{ token: Token; depth: number }> = tokens.map((token) => ({ token, depth: 0 }));
  while (stack.length > 0) {
    const { token, depth: outer } = stack.pop()!;
    const depth = token.type === 'blockquote' || token.type === 'list' ? outer + 1 : outer;
    if (depth > deepest) deepest = depth;
    const record = token as { tokens?: Token[]; items?: Token[] };
    for (const child of record.tokens ?? []) stack.push({ token: child, depth });
    for (const child of record.items ?? []) stack.push({ token: child, depth });
  }
  return deepest;
}

/** Markdown → HTML that is safe to embed: no script, no event handler, no `javascript:` (or other) URL. */
export function renderMarkdownBounded(markdown: string): RenderOutcome {
  if (markerNesting(markdown) > MAX_NESTING) return { ok: false, problem: nestingProblem };
  try {
    const tokens = marked.lexer(markdown, { gfm: true });
    if (tokenNesting(tokens) > MAX_NESTING) return { ok: false, problem: nestingProblem };
    const html = marked.parser(tokens, { gfm: true });
    if (html.length > HTML_MAX) return { ok: false, problem: `the content renders to more than ${HTML_MAX} characters of HTML` };
    return { ok: true, html: sanitizeHtml(html, SANITIZE) };
  } catch (error) {
    if (error instanceof RangeError) return { ok: false, problem: 'the content is nested too deeply to render' };
    return { ok: false, problem: 'the content could not be rendered as Markdown' };
  }
}
