// memsearch for OpenCode: tools (tools.json), notes of past sessions in the system prompt, and the capture daemon, all through the memsearch CLI with argument arrays (never a shell).
import { execFile, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
const TOOLS = JSON.parse(readFileSync(new URL("./tools.json", import.meta.url), "utf8")), MARK = "[memsearch] Memory available.";
const run = (args, cwd, input = "") => new Promise((done) => { const child = execFile("memsearch", args, { cwd: existsSync(cwd) ? cwd : undefined, timeout: 120000, maxBuffer: 1 << 26 }, (e, out, err) => done({ out: String(out ?? "").trim(), err: String(err || e?.message || "").trim() })); child.stdin.on("error", () => {}).end(input); });
const fill = (argv, p) => argv.flatMap((a) => [a].flat().every((x) => !x.startsWith("{") || p[x.slice(1, -1)] != null) ? [a].flat().map((x) => (x.startsWith("{") ? String(p[x.slice(1, -1)]) : x)) : []);
const merge = (system = [], text) => { const base = (system[0] ?? "").split(MARK)[0].trimEnd(); return [base ? `${base}\n\n${text}` : text, ...system.slice(1)]; };
export default async function MemsearchPlugin({ directory, worktree } = {}) {
  const dir = worktree && worktree !== "/" ? worktree : directory || process.cwd(), live = process.env.MEMSEARCH_NO_WATCH !== "1", collection = (await run(["hook", "opencode", "collection"], dir)).out;
  if (live) spawn("memsearch", ["hook", "opencode", "daemon"], { cwd: dir, stdio: "ignore" }).on("error", () => {}).unref();
  const s = (await import("@opencode-ai/plugin").catch(() => null))?.tool?.schema, hooks = { tool: {} };
  for (const [name, t] of s ? Object.entries(TOOLS) : []) hooks.tool[name] = { description: t.description, args: Object.fromEntries(Object.entries(t.args).map(([k, a]) => [k, a.optional ? s[a.type]().describe(a.description).optional() : s[a.type]().describe(a.description)])), execute: async (args) => { const r = await run(fill(t.argv, { ...t.defaults, ...args, collection }), dir); return r.out || r.err || t.empty; } };
  if (live) hooks["experimental.chat.system.transform"] = async (_input, output) => { const r = await run(["hook", "opencode", "session-start"], dir, "{}"); let text = ""; try { text = JSON.parse(r.out).system ?? ""; } catch {} if (text) output.system = merge(output.system, `${MARK} Use memory_search, memory_get and memory_transcript to recall past sessions.\n\n${text}`); };
  return hooks;
}
