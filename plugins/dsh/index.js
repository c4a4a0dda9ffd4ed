// memsearch for DeepSeek Harness (host facts: README.md): a Cordis plugin that registers the skills
// and hands two DSH events to `memsearch hook dsh <event>`, run with argument arrays (never a shell)
// in the session's folder, the event's facts as JSON on stdin.
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, readdirSync } from "node:fs";

export const name = "memsearch";
export const inject = ["skills", "sessionPersistence"];

const SKILLS = new URL("./skills/", import.meta.url);
// Why memsearch cannot answer, by the exit code of its run: not on PATH, or one without `memsearch
// hook dsh` (PyPI's memsearch is another package, or an older memsearch): a usage error, 2.
const BROKEN = {
  ENOENT: "is not installed",
  2: "on PATH cannot serve this plugin (it has no `memsearch hook dsh`)",
};
const FIX = "install it from your memsearch checkout with `uv tool install --force <checkout>`";

// Resolves to the JSON answer of `memsearch hook dsh EVENT`, {} when it has none, or {context}
// saying why memory is off when memsearch cannot answer at all.
function hook(event, input) {
  return new Promise((done) => {
    const options = { cwd: existsSync(input.cwd ?? "") ? input.cwd : undefined, timeout: 120000 };
    const child = execFile("memsearch", ["hook", "dsh", event], options, (error, out) => {
      const why = BROKEN[error?.code];
      try {
        done(why ? { context: `[memsearch] memsearch ${why}: ${FIX}.` } : JSON.parse(out));
      } catch {
        done({});
      }
    });
    child.stdin.on("error", () => {}).end(JSON.stringify(input));
  });
}

// A skill of skills/<folder>/SKILL.md as a DSH runtime skill: name and description from its front
// matter, the body as its content.
function skill(folder) {
  const text = readFileSync(new URL(`${folder}/SKILL.md`, SKILLS), "utf8");
  const [, head, body] = text.match(/^---\n([\s\S]*?)\n---\n([\s\S]*)$/);
  const field = (key) => head.match(new RegExp(`^${key}: (.+)$`, "m"))[1];
  return { name: field("name"), description: field("description"), content: body.trim(), source: "runtime" };
}

// A sub-agent's session (started by DSH's subagent tools): its work shows in its parent's turn,
// which is what gets journaled.
const subagent = (session) => session.header.origin === "subagent";

// One user message from this plugin, shaped like the ones DSH's own plugins add to a step.
function message(text) {
  const source = { kind: "plugin", plugin: name, form: "snapshot", sections: [{ name, text }] };
  return Object.freeze({ id: randomUUID(), role: "user", content: [{ type: "text", text }], source });
}

export function apply(ctx, config = {}) {
  // memsearch's own summariser runs `dsh` with these set: nothing of this plugin runs in there.
  if (process.env.MEMSEARCH_DISABLE === "1" || process.env.MEMSEARCH_DSH_SUMMARIZE === "1") return;
  for (const folder of readdirSync(SKILLS)) ctx.skills.register(skill(folder));
  const started = new Set();

  if (config.injectEnabled !== false) {
    // Step 1 of each turn: the recall hint; before it, in the first turn seen of a session, the
    // session start (recent journals, background index, due maintenance).
    const preStep = async ({ agent, turn, step, messages, signal }, next) => {
      const decision = await next();
      const session = agent.session;
      if (step !== 1 || decision.kind === "reject" || signal.aborted || subagent(session)) return decision;
      const input = { session_id: session.id, cwd: session.header.cwd, turn, messages };
      const events = started.has(session.id) ? ["prompt-submit"] : ["session-start", "prompt-submit"];
      started.add(session.id);
      const replies = await Promise.all(events.map((event) => hook(event, input)));
      replies.forEach((reply) => reply.systemMessage && ctx.logger.info(reply.systemMessage));
      const text = [...new Set(replies.map((reply) => reply.context).filter(Boolean))].join("\n\n");
      return text ? { ...decision, messages: [...decision.messages, message(text)] } : decision;
    };
    ctx.on("agent/pre-step", preStep, { prepend: true });
  }

  if (config.captureEnabled !== false) {
    // The turn is over: memsearch hands it to a detached worker and answers at once (a one-shot
    // `dsh` waits for that answer, not for the summary).
    ctx.on("session/event", (session, event) => {
      if (event.type !== "turn/end" || subagent(session)) return;
      const db = ctx.sessionPersistence.locate?.(session.header)?.path ?? "";
      hook("stop", { session_id: session.id, cwd: session.header.cwd, turn: event.data?.turn, db });
    });
  }
}
