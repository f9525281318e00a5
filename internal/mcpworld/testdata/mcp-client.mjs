// A real npm MCP client (the TypeScript SDK's Client) used by the Go tests:
// it connects over stdio or streamable HTTP, lists the tools, makes the
// calls given as JSON and prints one JSON report on stdout.
//
//   node mcp-client.mjs SDK_DIR CALLS_JSON --http URL
//   node mcp-client.mjs SDK_DIR CALLS_JSON --stdio CMD [ARGS...]
//
// SDK_DIR is the installed @modelcontextprotocol/sdk package directory;
// CALLS_JSON is [{"name": tool, "arguments": {...}}, ...].
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, callsJSON, mode, ...rest] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(path.join(sdkDir, "dist/esm", p)).href);
const { Client } = await load("client/index.js");
let transport;
if (mode === "--http") {
  const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
  transport = new StreamableHTTPClientTransport(new URL(rest[0]));
} else if (mode === "--stdio") {
  const { StdioClientTransport } = await load("client/stdio.js");
  transport = new StdioClientTransport({ command: rest[0], args: rest.slice(1), env: process.env, stderr: "inherit" });
} else {
  console.error("usage: mcp-client.mjs SDK_DIR CALLS_JSON --http URL | --stdio CMD ARGS...");
  process.exit(2);
}
const client = new Client({ name: "agentworld-npm-test-client", version: "1.0.0" });
await client.connect(transport);
const report = { server: client.getServerVersion(), tools: [], results: [] };
const listed = await client.listTools();
report.tools = listed.tools.map((t) => ({ name: t.name, hasOutputSchema: !!t.outputSchema, inputSchema: t.inputSchema }));
for (const call of JSON.parse(callsJSON)) {
  try {
    report.results.push({ result: await client.callTool(call) });
  } catch (e) {
    report.results.push({ error: { code: e.code, message: e.message } });
  }
}
await client.close();
console.log(JSON.stringify(report));
