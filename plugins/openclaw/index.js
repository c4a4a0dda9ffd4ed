// memsearch for OpenClaw (host facts: README.md). Tools (tools.json) and hooks run the memsearch CLI with argument arrays, never a shell.
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
const TOOLS = JSON.parse(readFileSync(new URL("./tools.json", import.meta.url), "utf8"));
const run = (args, cwd, input = "") => new Promise((done) => { const child = execFile("memsearch", args, { cwd: existsSync(cwd) ? cwd : undefined, timeout: 120000, maxBuffer: 1 << 26 }, (e, out, err) => done({ out: String(out ?? "").trim(), err: String(err || e?.message || "").trim() })); child.stdin.on("error", () => {}).end(input); });
const fill = (argv, p) => argv.flatMap((a) => [a].flat().every((x) => !x.startsWith("{") || p[x.slice(1, -1)] != null) ? [a].flat().map((x) => (x.startsWith("{") ? String(p[x.slice(1, -1)]) : x)) : []);
const workspace = (ctx = {}) => ctx.workspaceDir || `${homedir()}/.openclaw/workspace${ctx.agentId && ctx.agentId !== "main" ? `-${ctx.agentId}` : ""}`;
const collections = new Map(), collection = async (dir) => collections.get(dir) ?? collections.set(dir, (await run(["hook", "openclaw", "collection"], dir)).out).get(dir);
const hook = async (event, ev = {}, ctx = {}, extra = {}) => { const r = await run(["hook", "openclaw", event], workspace(ctx), JSON.stringify({ sessionId: ev.sessionId || ctx.sessionId, agentId: ctx.agentId, workspaceDir: workspace(ctx), ...extra })); try { return JSON.parse(r.out); } catch { return {}; } };
export default { id: "memsearch", name: "memsearch", kind: "memory", description: "Markdown memory: capture each turn, recall past sessions.", register(api) {
  const live = process.env.MEMSEARCH_NO_WATCH !== "1", cfg = api.pluginConfig ?? {};
  for (const [name, t] of Object.entries(TOOLS)) api.registerTool((ctx) => ({ name, label: t.label, description: t.description, parameters: t.parameters, catalogMode: "direct-only", execute: async (_id, p = {}) => { const r = await run(fill(t.argv, { ...t.defaults, ...p, collection: await collection(workspace(ctx)) }), workspace(ctx)); return { content: [{ type: "text", text: r.out || r.err || t.empty }] }; } }), { name });
  if (live && cfg.autoRecall !== false) api.on("before_prompt_build", async (ev, ctx) => { const r = await hook("session-start", ev, ctx); return r.prependContext ? { prependContext: r.prependContext } : undefined; });
  if (live && cfg.autoCapture !== false) api.on("agent_end", (ev, ctx) => hook("stop", ev, ctx, { messages: Array.isArray(ev.messages) ? ev.messages : [] }).then(() => undefined)); } };
