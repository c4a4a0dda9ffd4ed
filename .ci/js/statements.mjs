// Counts the statements of JavaScript modules, for the plugin layout test (tests/test_plugins_layout.py).
// Usage: node .ci/js/statements.mjs FILE...  →  {"FILE": {"top": n, "all": n, "functions": n}, ...}
// A statement is any node acorn names *Statement or *Declaration, except blocks and empty
// statements: a measure of how much logic a file holds, whatever its line breaks.
import { readFileSync } from "node:fs";
import { parse } from "acorn";

function count(node, totals) {
  if (!node || typeof node.type !== "string") return;
  const kind = node.type;
  if (
    (kind.endsWith("Statement") || kind.endsWith("Declaration")) &&
    kind !== "BlockStatement" &&
    kind !== "EmptyStatement"
  ) {
    totals.all += 1;
  }
  if (kind.includes("Function")) totals.functions += 1;
  for (const value of Object.values(node)) {
    for (const child of Array.isArray(value) ? value : [value]) {
      if (child && typeof child === "object") count(child, totals);
    }
  }
}

const result = {};
for (const file of process.argv.slice(2)) {
  const ast = parse(readFileSync(file, "utf8"), { ecmaVersion: "latest", sourceType: "module" });
  const totals = { top: ast.body.length, all: 0, functions: 0 };
  count(ast, totals);
  result[file] = totals;
}
console.log(JSON.stringify(result));
