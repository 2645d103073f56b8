import type { KyselyPlugin, PluginTransformQueryArgs, PluginTransformResultArgs, QueryResult, RootOperationNode, UnknownRow } from 'kysely';

/**
 * The statements of the background drains (mail, webhook and back-channel-logout deliveries): their
 * passes run on a timer, so one may fall inside any recorded request; they are not the request's.
 */
const BACKGROUND_DRAINS = new Set(['outbox', 'webhook_deliveries', 'logout_deliveries'].flatMap((table) => [`select ${table}`, `update ${table}`]));

/** Records the shape (kind and table) of every statement the app sends while `on`, but the background drains'. */
export class StatementRecorder implements KyselyPlugin {
  on = false;
  readonly seen: string[] = [];
  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    const shape = `${args.node.kind.replace('QueryNode', '').toLowerCase()} ${tableOf(args.node)}`;
    if (this.on && !BACKGROUND_DRAINS.has(shape)) this.seen.push(shape);
    return args.node;
  }
  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return args.result;
  }
  async during(fn: () => Promise<unknown>): Promise<string[]> {
    this.seen.length = 0;
    this.on = true;
    try {
      await fn();
    } finally {
      this.on = false;
    }
    return [...this.seen];
  }
}

function tableOf(node: RootOperationNode): string {
  const n = node as unknown as { into?: unknown; table?: unknown; from?: { froms?: unknown[] } };
  const name = (x: unknown): string | undefined => {
    const o = x as { kind?: string; table?: { identifier?: { name?: string } }; node?: unknown } | undefined;
    if (o?.kind === 'TableNode') return o.table?.identifier?.name;
    if (o?.kind === 'AliasNode') return name(o.node);
    return undefined;
  };
  return name(n.into) ?? name(n.table) ?? name(n.from?.froms?.[0]) ?? '-';
}
