// memsearch for OpenClaw (host facts: README.md). Tools (tools.json) and hooks run the memsearch
// CLI with argument arrays, never a shell.
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";

const TOOLS = JSON.parse(readFileSync(new URL("./tools.json", import.meta.url), "utf8"));

// Runs `memsearch ARGS` in `cwd` with `input` on stdin; resolves to its trimmed stdout and stderr
// and its exit code (0, a number, or "ENOENT" when there is no memsearch on PATH).
function run(args, cwd, input = "") {
  return new Promise((done) => {
    const options = { cwd: existsSync(cwd) ? cwd : undefined, timeout: 120000, maxBuffer: 1 << 26 };
    const child = execFile("memsearch", args, options, (error, out, err) =>
      done({
        out: String(out ?? "").trim(),
        err: String(err || error?.message || "").trim(),
        code: error?.code ?? 0,
      }),
    );
    child.stdin.on("error", () => {}).end(input);
  });
}

// Why memsearch cannot serve this plugin, by its exit code: not on PATH, or another package named
// memsearch (PyPI's has no `memsearch hook`, so it answers with a usage error, 2).
const PROBLEMS = {
  ENOENT: "not installed",
  2: "the memsearch on PATH is not this plugin's (no `memsearch hook`)",
};

// That reason as one line for the session, or "" when memsearch answered.
function problem(result) {
  const why = PROBLEMS[result.code];
  const fix = "`uv tool install --force <checkout>` (PyPI's memsearch is another package)";
  return why ? `[memsearch] ${why}: install it from your memsearch checkout: ${fix}.` : "";
}

// A tool's argv template with `{name}` placeholders filled from `params`; an item (or a group of
// items, such as a flag and its value) is left out when one of its placeholders has no value.
function fill(argv, params) {
  const isSlot = (item) => item.startsWith("{");
  const value = (item) => params[item.slice(1, -1)];
  return argv.flatMap((group) => {
    const items = [group].flat();
    if (!items.every((item) => !isSlot(item) || value(item) != null)) return [];
    return items.map((item) => (isSlot(item) ? String(value(item)) : item));
  });
}

// The agent's workspace: the one OpenClaw names, else its default folder for that agent.
function workspace(ctx = {}) {
  const suffix = ctx.agentId && ctx.agentId !== "main" ? `-${ctx.agentId}` : "";
  return ctx.workspaceDir || `${homedir()}/.openclaw/workspace${suffix}`;
}

// The memsearch collection of a workspace, asked once per folder.
const collections = new Map();
async function collection(dir) {
  if (!collections.has(dir)) {
    collections.set(dir, (await run(["hook", "openclaw", "collection"], dir)).out);
  }
  return collections.get(dir);
}

// Runs `memsearch hook openclaw EVENT` with the session's facts on stdin; its JSON answer, {}, or
// {problem} when memsearch cannot serve the plugin (see problem()).
async function hook(event, ev = {}, ctx = {}, extra = {}) {
  const input = {
    sessionId: ev.sessionId || ctx.sessionId,
    agentId: ctx.agentId,
    workspaceDir: workspace(ctx),
    ...extra,
  };
  const result = await run(["hook", "openclaw", event], workspace(ctx), JSON.stringify(input));
  const broken = problem(result);
  if (broken) return { problem: broken };
  try {
    return JSON.parse(result.out);
  } catch {
    return {};
  }
}

export default {
  id: "memsearch",
  name: "memsearch",
  kind: "memory",
  description: "Markdown memory: capture each turn, recall past sessions.",
  register(api) {
    const live = process.env.MEMSEARCH_NO_WATCH !== "1";
    const cfg = api.pluginConfig ?? {};

    for (const [name, tool] of Object.entries(TOOLS)) {
      const factory = (ctx) => ({
        name,
        label: tool.label,
        description: tool.description,
        parameters: tool.parameters,
        catalogMode: "direct-only",
        execute: async (_id, params = {}) => {
          const dir = workspace(ctx);
          const argv = fill(tool.argv, { ...tool.defaults, ...params, collection: await collection(dir) });
          const result = await run(argv, dir);
          // An empty JSON list: what stderr says of it (memsearch's "No strong match in memory ...").
          const out = result.out === "[]" ? "" : result.out;
          return { content: [{ type: "text", text: out || result.err || tool.empty }] };
        },
      });
      api.registerTool(factory, { name });
    }

    if (live && cfg.autoRecall !== false) {
      api.on("before_prompt_build", async (ev, ctx) => {
        const reply = await hook("session-start", ev, ctx);
        const text = reply.prependContext || reply.problem;
        return text ? { prependContext: text } : undefined;
      });
    }

    if (live && cfg.autoCapture !== false) {
      api.on("agent_end", (ev, ctx) => {
        const messages = Array.isArray(ev.messages) ? ev.messages : [];
        return hook("stop", ev, ctx, { messages }).then(() => undefined);
      });
    }
  },
};
