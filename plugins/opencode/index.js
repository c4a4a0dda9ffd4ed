// memsearch for OpenCode: tools (tools.json), notes of past sessions in the system prompt, and the
// capture daemon, all through the memsearch CLI with argument arrays (never a shell).
//
// OpenCode 1.18.33: tool args in plain JSON Schema need no `@opencode-ai/plugin` (not importable
// from a checkout) but are all required, so optional ones take null; the system hook must change
// OpenCode's own array in place; the daemon gets its own session so quitting the TUI does not cut
// its last pass short.
import { execFile, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";

const TOOLS = JSON.parse(readFileSync(new URL("./tools.json", import.meta.url), "utf8"));
const MARK = "[memsearch] Memory available.";
const RECALL_NOTE = "Use memory_search, memory_get and memory_transcript to recall past sessions.";

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

// One tool argument as JSON Schema; optional ones also take null (OpenCode requires every arg).
function schema(arg) {
  return {
    type: arg.optional ? [arg.type, "null"] : arg.type,
    description: arg.optional ? `${arg.description} null for the default.` : arg.description,
  };
}

// The arguments the model actually gave (null means "use the default").
function given(args = {}) {
  return Object.fromEntries(Object.entries(args).filter(([, value]) => value != null));
}

// The system prompt with our notes appended to its first part, replacing notes added earlier (all
// that follows `mark`, where they begin).
function merge(system = [], text, mark = MARK) {
  const base = (system[0] ?? "").split(mark)[0].trimEnd();
  return [base ? `${base}\n\n${text}` : text, ...system.slice(1)];
}

export default async function MemsearchPlugin({ directory, worktree } = {}) {
  const dir = worktree && worktree !== "/" ? worktree : directory || process.cwd();
  const live = process.env.MEMSEARCH_NO_WATCH !== "1";
  const probe = await run(["hook", "opencode", "collection"], dir);
  const broken = problem(probe);
  if (broken) {
    // No tools, no daemon: the model hears once per system prompt why memory is off.
    return {
      "experimental.chat.system.transform": async (_input, output) => {
        if (Array.isArray(output.system))
          output.system.splice(0, output.system.length, ...merge(output.system, broken, broken));
      },
    };
  }
  const collection = probe.out;
  const hooks = { tool: {} };

  if (live) {
    spawn("memsearch", ["hook", "opencode", "daemon"], { cwd: dir, stdio: "ignore", detached: true })
      .on("error", () => {})
      .unref();
  }

  for (const [name, tool] of Object.entries(TOOLS)) {
    hooks.tool[name] = {
      description: tool.description,
      args: Object.fromEntries(Object.entries(tool.args).map(([key, arg]) => [key, schema(arg)])),
      execute: async (args) => {
        const params = { ...tool.defaults, ...given(args), collection };
        const result = await run(fill(tool.argv, params), dir);
        // An empty JSON list: what stderr says of it (memsearch's "No strong match in memory ...").
        return (result.out === "[]" ? "" : result.out) || result.err || tool.empty;
      },
    };
  }

  if (live) {
    hooks["experimental.chat.system.transform"] = async (_input, output) => {
      const result = await run(["hook", "opencode", "session-start"], dir, "{}");
      let text = "";
      try {
        text = JSON.parse(result.out).system ?? "";
      } catch {}
      if (text && Array.isArray(output.system)) {
        const merged = merge(output.system, `${MARK} ${RECALL_NOTE}\n\n${text}`);
        output.system.splice(0, output.system.length, ...merged);
      }
    };
  }
  return hooks;
}
