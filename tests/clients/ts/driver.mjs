// Drive memhub with the official TypeScript MCP SDK client.
//
//   node driver.mjs stdio COMMAND [ARG...]   < calls.json
//   node driver.mjs http URL                 < calls.json
//
// calls.json is a JSON list; each entry is {"list": true} (tools/list) or
// {"tool": NAME, "arguments": {...}} (tools/call); an argument "{{N.path.to.value}}" is replaced
// by that value of the N-th call's result (e.g. "{{1.structuredContent.project_id}}").
// One JSON object is printed:
// {"server": {name, version}, "results": [...]}, one result per call:
// {"ok": <the SDK's result>} or {"thrown": {"code", "message"}} when the SDK threw
// (for example when it rejects a result that does not match the tool's outputSchema).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

function resolve(value, results) {
  if (typeof value === "string") {
    const ref = /^\{\{(\d+)\.([\w.]+)\}\}$/.exec(value);
    if (!ref) return value;
    let node = results[Number(ref[1])]?.ok;
    for (const key of ref[2].split(".")) node = node?.[key];
    if (node === undefined) throw new Error(`unresolved reference ${value}`);
    return node;
  }
  if (Array.isArray(value)) return value.map((v) => resolve(v, results));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolve(v, results)]));
  }
  return value;
}

function transportFor(argv) {
  const [kind, target, ...rest] = argv;
  if (kind === "stdio" && target) {
    return new StdioClientTransport({ command: target, args: rest, env: process.env, stderr: "inherit" });
  }
  if (kind === "http" && target) {
    return new StreamableHTTPClientTransport(new URL(target));
  }
  throw new Error("usage: driver.mjs stdio COMMAND [ARG...] | http URL  (calls as JSON on stdin)");
}

async function main() {
  const calls = JSON.parse(await readStdin());
  const client = new Client({ name: "memhub-ts-test", version: "1.0.0" });
  await client.connect(transportFor(process.argv.slice(2)));
  const results = [];
  for (const call of calls) {
    try {
      if (call.list) {
        results.push({ ok: await client.listTools() });
      } else {
        const args = resolve(call.arguments ?? {}, results);
        results.push({ ok: await client.callTool({ name: call.tool, arguments: args }) });
      }
    } catch (err) {
      results.push({ thrown: { code: err?.code ?? null, message: String(err?.message ?? err) } });
    }
  }
  const server = client.getServerVersion() ?? null;
  await client.close();
  process.stdout.write(JSON.stringify({ server, results }) + "\n");
}

main().catch((err) => {
  process.stderr.write(`driver failed: ${err?.stack ?? err}\n`);
  process.exit(1);
});
