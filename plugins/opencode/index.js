// memsearch for OpenCode: tools (tools.json), notes of past sessions in the system prompt, and the capture daemon, all through the memsearch CLI with argument arrays (never a shell).
// OpenCode 1.18.33: tool args in plain JSON Schema need no `@opencode-ai/plugin` (not importable from a checkout) but are all required, so optional ones take null; the system hook must change OpenCode's own array in place; the daemon gets its own session so quitting the TUI does not cut its last pass short.
import { execFile, spawn } from "node:child_process"; import { existsSync, readFileSync } from "node:fs";
const TOOLS = JSON.parse(readFileSync(new URL("./tools.json", import.meta.url), "utf8")), MARK = "[memsearch] Memory available.";
const run = (args, cwd, input = "") => new Promise((done) => { const child = execFile("memsearch", args, { cwd: existsSync(cwd) ? cwd : undefined, timeout: 120000, maxBuffer: 1 << 26 }, (e, out, err) => done({ out: String(out ?? "").trim(), err: String(err || e?.message || "").trim() })); child.stdin.on("error", () => {}).end(input); });
const fill = (argv, p) => argv.flatMap((a) => [a].flat().every((x) => !x.startsWith("{") || p[x.slice(1, -1)] != null) ? [a].flat().map((x) => (x.startsWith("{") ? String(p[x.slice(1, -1)]) : x)) : []);
const schema = (a) => ({ type: a.optional ? [a.type, "null"] : a.type, description: a.optional ? `${a.description} null for the default.` : a.description }), given = (args = {}) => Object.fromEntries(Object.entries(args).filter(([, v]) => v != null));
const merge = (system = [], text) => { const base = (system[0] ?? "").split(MARK)[0].trimEnd(); return [base ? `${base}\n\n${text}` : text, ...system.slice(1)]; };
export default async function MemsearchPlugin({ directory, worktree } = {}) {
  const dir = worktree && worktree !== "/" ? worktree : directory || process.cwd(), live = process.env.MEMSEARCH_NO_WATCH !== "1", collection = (await run(["hook", "opencode", "collection"], dir)).out, hooks = { tool: {} };
  if (live) spawn("memsearch", ["hook", "opencode", "daemon"], { cwd: dir, stdio: "ignore", detached: true }).on("error", () => {}).unref();
  for (const [name, t] of Object.entries(TOOLS)) hooks.tool[name] = { description: t.description, args: Object.fromEntries(Object.entries(t.args).map(([k, a]) => [k, schema(a)])), execute: async (args) => { const r = await run(fill(t.argv, { ...t.defaults, ...given(args), collection }), dir); return r.out || r.err || t.empty; } };
  if (live) hooks["experimental.chat.system.transform"] = async (_input, output) => { const r = await run(["hook", "opencode", "session-start"], dir, "{}"); let text = ""; try { text = JSON.parse(r.out).system ?? ""; } catch {} if (text && Array.isArray(output.system)) output.system.splice(0, output.system.length, ...merge(output.system, `${MARK} Use memory_search, memory_get and memory_transcript to recall past sessions.\n\n${text}`)); };
  return hooks;
}
