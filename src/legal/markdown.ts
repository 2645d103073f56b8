import { marked, type Token } from 'marked';
import sanitizeHtml from 'sanitize-html';
import { markerNesting, MAX_NESTING, nestingProblem, type RenderOutcome } from './nesting.js';

/**
 * Legal Markdown → sanitized HTML, with limits (SECURITY hardening item 5). Pure and synchronous: it
 * runs inside the render worker (`render-worker.ts`), never on the event loop, because marked's
 * inline parser is super-linear on hostile input (57 kB of `*a_` takes ~40 s) and its block parser
 * recurses once per nesting level (29,000 `> ` overflow the stack). The worker adds the time limit.
 */

/** Largest HTML a document may render to, before sanitizing (reference links can multiply the input). */
export const HTML_MAX = 1_000_000;

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
