import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Summarises a V8 `.cpuprofile` (from `node --cpu-prof`, e.g. `npm run bench -- http --profile refresh`):
 * the top functions by self time (with their inclusive time), and self time per package / area
 * (Gatehouse's own files, each node_modules package, node internals, GC, idle).
 *
 *   npx tsx bench/http/profile-summary.ts <file.cpuprofile | directory> [--top N] [--all]
 *
 * When `<file>.window.json` exists (the benchmark writes it), only the measured run is counted, not the
 * server's start-up, warm-up and shutdown; `--all` counts the whole profile.
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface FunctionStat {
  name: string;
  location: string;
  area: string;
  selfMs: number;
  totalMs: number;
}

export interface ProfileSummary {
  file: string;
  window?: Window;
  sampledMs: number;
  /** Sampled time minus (idle): what the process spent working. */
  busyMs: number;
  functions: FunctionStat[];
  areas: Array<{ area: string; selfMs: number }>;
}

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));

function shortUrl(url: string): string {
  let u = url.startsWith('file://') ? decodeURIComponent(url.slice(7)) : url;
  if (u.startsWith(ROOT + '/')) u = u.slice(ROOT.length + 1);
  const nm = u.lastIndexOf('node_modules/');
  if (nm >= 0) u = u.slice(nm + 'node_modules/'.length);
  return u;
}

function areaOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) {
    if (functionName.startsWith('(')) return functionName; // (garbage collector), (idle), (program), (root)
    return '(native)';
  }
  if (url.startsWith('node:')) return 'node internals';
  const u = url.startsWith('file://') ? decodeURIComponent(url.slice(7)) : url;
  const nm = u.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = u.slice(nm + 'node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (u.startsWith(ROOT + '/')) {
    const rel = u.slice(ROOT.length + 1);
    const m = /^(?:dist\/)?(src|migrations|bench)\/([^/]+)/.exec(rel);
    return m ? `gatehouse ${m[1]}/${m[2]}` : `gatehouse ${rel}`;
  }
  return 'other';
}

/** A time window on the profile's clock (µs, the system monotonic clock), e.g. the measured run only. */
export interface Window {
  fromUs: number;
  toUs: number;
}

/** `<profile>.window.json`, written by the benchmark next to a profile: the measured run's window. */
export function windowFileOf(file: string): string {
  return `${file}.window.json`;
}

export function summarizeProfile(file: string, window?: Window): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  if (!window && existsSync(windowFileOf(file))) window = JSON.parse(readFileSync(windowFileOf(file), 'utf8')) as Window;
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const keyOf = (f: CallFrame) => `${f.functionName || '(anonymous)'}\u0000${f.url}\u0000${f.lineNumber}`;
  const stats = new Map<string, FunctionStat>();
  const statOf = (node: ProfileNode): FunctionStat => {
    const k = keyOf(node.callFrame);
    let s = stats.get(k);
    if (!s) {
      const f = node.callFrame;
      s = {
        name: f.functionName || '(anonymous)',
        location: f.url ? `${shortUrl(f.url)}:${f.lineNumber + 1}` : '',
        area: areaOf(f),
        selfMs: 0,
        totalMs: 0,
      };
      stats.set(k, s);
    }
    return s;
  };
  const { samples, timeDeltas } = profile;
  // A sample's duration: the time until the next sample (the last one gets the mean).
  const mean = samples.length > 1 ? (profile.endTime - profile.startTime) / samples.length : 0;
  let sampledUs = 0;
  let idleUs = 0;
  let at = profile.startTime;
  for (let i = 0; i < samples.length; i++) {
    at += timeDeltas[i] ?? 0;
    if (window && (at < window.fromUs || at > window.toUs)) continue;
    const us = i + 1 < timeDeltas.length ? Math.max(0, timeDeltas[i + 1]!) : mean;
    sampledUs += us;
    const node = byId.get(samples[i]!);
    if (!node) continue;
    const self = statOf(node);
    self.selfMs += us / 1000;
    if (node.callFrame.functionName === '(idle)') idleUs += us;
    const seen = new Set<FunctionStat>();
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const s = statOf(byId.get(id)!);
      if (!seen.has(s)) {
        seen.add(s);
        s.totalMs += us / 1000;
      }
    }
  }
  const functions = [...stats.values()].filter((s) => s.name !== '(root)').sort((a, b) => b.selfMs - a.selfMs);
  const areaMap = new Map<string, number>();
  for (const s of functions) areaMap.set(s.area, (areaMap.get(s.area) ?? 0) + s.selfMs);
  const areas = [...areaMap.entries()].map(([area, selfMs]) => ({ area, selfMs })).sort((a, b) => b.selfMs - a.selfMs);
  return { file, window, sampledMs: sampledUs / 1000, busyMs: (sampledUs - idleUs) / 1000, functions, areas };
}

export function formatSummary(summary: ProfileSummary, top = 30): string {
  const pct = (ms: number) => `${((100 * ms) / (summary.busyMs || 1)).toFixed(1)}%`;
  const lines: string[] = [];
  const scope = summary.window && Number.isFinite(summary.window.fromUs) ? 'the measured run only' : 'the whole process life, start-up included';
  lines.push(`${summary.file}: ${(summary.sampledMs / 1000).toFixed(1)} s sampled (${scope}), ${(summary.busyMs / 1000).toFixed(1)} s busy; percentages are of busy time`);
  lines.push('', `Top ${top} functions by self time:`, '| self ms | self % | total % | function | where |', '|---:|---:|---:|---|---|');
  for (const f of summary.functions.filter((x) => x.name !== '(idle)').slice(0, top)) {
    lines.push(`| ${f.selfMs.toFixed(0)} | ${pct(f.selfMs)} | ${pct(f.totalMs)} | ${f.name} | ${f.location || f.area} |`);
  }
  lines.push('', 'Self time by area:', '| self ms | % | area |', '|---:|---:|---|');
  for (const a of summary.areas.filter((x) => x.area !== '(idle)').slice(0, 25)) lines.push(`| ${a.selfMs.toFixed(0)} | ${pct(a.selfMs)} | ${a.area} |`);
  return lines.join('\n');
}

const isEntry = process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (isEntry) {
  const args = process.argv.slice(2);
  const topIndex = args.indexOf('--top');
  const top = topIndex >= 0 ? Number(args[topIndex + 1]) : 30;
  const paths = args.filter((a, i) => !a.startsWith('--') && (topIndex < 0 || i !== topIndex + 1));
  if (!paths.length) {
    console.error('usage: npx tsx bench/http/profile-summary.ts <file.cpuprofile | directory> [--top N]');
    process.exit(2);
  }
  const all = args.includes('--all');
  for (const p of paths) {
    const files = statSync(p).isDirectory() ? readdirSync(p).filter((f) => f.endsWith('.cpuprofile')).map((f) => join(p, f)) : [p];
    for (const f of files) console.log(formatSummary(summarizeProfile(f, all ? { fromUs: -Infinity, toUs: Infinity } : undefined), top) + '\n');
  }
}
