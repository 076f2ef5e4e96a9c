// The TypeScript MCP SDK (@modelcontextprotocol/sdk 1.x) as a client driven over stdin/stdout by ts_driver.py.
//
// One JSON object per line each way. Commands: {"id", "op", ...}; answers: {"id", "result"} or
// {"id", "error": {"name", "message", "code", "data"}}; events without an id:
//   {"event": "authorize", "url"}            the SDK sent the user to the authorization endpoint; the driver
//                                            answers {"op": "authorization_code", "code"} once the browser is done
//   {"event": "notification", "method", "params"}
//
// Ops: connect {url, token?, oauth?: {redirect_uri, client_name}, connection_close?, record_headers?: [name]},
//      list_page {cursor?}, list_all, templates, read {uri}, subscribe {uri}, listings, session, oauth_state, close.
// connection_close sends every request with "Connection: close": each on a new connection (no keep-alive).
// record_headers: for each resources/list POST the transport sent, its status and these response headers, which
// `listings` returns (and forgets), in the order sent; a walk that failed keeps the answer it failed on.
import { createInterface } from 'node:readline';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const emit = (message) => process.stdout.write(JSON.stringify(message) + '\n');

let pendingCode = null; // resolves with the authorization code the driver sends
const codes = [];
const awaitCode = () =>
  codes.length ? Promise.resolve(codes.shift()) : new Promise((resolve) => { pendingCode = resolve; });

class MemoryOAuthProvider {
  constructor(redirectUri, clientName) {
    this._redirectUri = redirectUri;
    this._clientName = clientName;
    this._client = undefined;
    this._tokens = undefined;
    this._verifier = undefined;
    this.authorizations = 0;
  }
  get redirectUrl() { return this._redirectUri; }
  get clientMetadata() {
    return {
      client_name: this._clientName,
      redirect_uris: [this._redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() { return this._client; }
  saveClientInformation(info) { this._client = info; }
  tokens() { return this._tokens; }
  saveTokens(tokens) { this._tokens = tokens; }
  redirectToAuthorization(url) { this.authorizations += 1; emit({ event: 'authorize', url: url.toString() }); }
  saveCodeVerifier(verifier) { this._verifier = verifier; }
  codeVerifier() { return this._verifier; }
}

let client = null;
let transport = null;
let provider = null;
let connectArgs = null;
let listings = [];

// The transport's fetch: with connection_close, no request reuses a connection; with record_headers, every
// resources/list answer is noted.
async function testFetch(url, init) {
  const request = { ...init };
  if (connectArgs.connection_close) {
    request.headers = new Headers(init?.headers);
    request.headers.set('Connection', 'close');
  }
  const response = await fetch(url, request);
  if (connectArgs.record_headers && request.method === 'POST' && typeof request.body === 'string') {
    const sent = JSON.parse(request.body);
    if (!Array.isArray(sent) && sent.method === 'resources/list') {
      const headers = Object.fromEntries(connectArgs.record_headers.map((name) => [name, response.headers.get(name)]));
      listings.push({ status: response.status, headers });
    }
  }
  return response;
}

function newTransport() {
  const options = {};
  if (connectArgs.token) options.requestInit = { headers: { Authorization: `Bearer ${connectArgs.token}` } };
  if (provider) options.authProvider = provider;
  if (connectArgs.connection_close || connectArgs.record_headers) options.fetch = testFetch;
  return new StreamableHTTPClientTransport(new URL(connectArgs.url), options);
}

function newClient() {
  const created = new Client({ name: 'django-mcp-resources ts tests', version: '0.0.1' });
  created.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) =>
    emit({ event: 'notification', method: n.method, params: n.params }));
  created.setNotificationHandler(ResourceListChangedNotificationSchema, (n) =>
    emit({ event: 'notification', method: n.method, params: n.params ?? {} }));
  return created;
}

// Runs fn(); on the SDK's UnauthorizedError (it has sent the user to authorize), waits for the code, finishes the
// flow on the same transport and runs fn() once more: the same client instance, as a real application does.
async function authorized(fn) {
  try {
    return await fn();
  } catch (error) {
    if (!(error instanceof UnauthorizedError) || !provider) throw error;
    const code = await awaitCode();
    await transport.finishAuth(code);
    return await fn();
  }
}

const ops = {
  async connect(args) {
    connectArgs = args;
    provider = args.oauth ? new MemoryOAuthProvider(args.oauth.redirect_uri, args.oauth.client_name) : null;
    client = newClient();
    transport = newTransport();
    try {
      await client.connect(transport);
    } catch (error) {
      if (!(error instanceof UnauthorizedError) || !provider) throw error;
      // Refused at initialize: finish the flow, then connect again with the tokens (the SDK's own example does so).
      const code = await awaitCode();
      await transport.finishAuth(code);
      client = newClient();
      transport = newTransport();
      await client.connect(transport);
    }
    return {
      protocolVersion: transport.protocolVersion ?? null,
      sessionId: transport.sessionId ?? null,
      capabilities: client.getServerCapabilities() ?? null,
    };
  },
  async list_page({ cursor }) {
    return authorized(() => client.listResources(cursor === undefined || cursor === null ? {} : { cursor }));
  },
  async list_all() {
    const pages = [];
    const resources = [];
    let cursor;
    do {
      const page = await authorized(() => client.listResources(cursor === undefined ? {} : { cursor }));
      pages.push(page.resources.length);
      resources.push(...page.resources);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return { pages, resources };
  },
  async templates() {
    return authorized(() => client.listResourceTemplates());
  },
  async read({ uri }) {
    return authorized(() => client.readResource({ uri }));
  },
  async subscribe({ uri }) {
    return authorized(() => client.subscribeResource({ uri }));
  },
  async listings() {
    const noted = listings;
    listings = [];
    return { listings: noted };
  },
  async session() {
    return { sessionId: transport.sessionId ?? null };
  },
  async oauth_state() {
    return {
      authorizations: provider ? provider.authorizations : 0,
      registered: Boolean(provider && provider.clientInformation()),
      token: provider && provider.tokens() ? provider.tokens().access_token : null,
    };
  },
  async close() {
    if (client) await client.close();
    return {};
  },
};

function describe(error) {
  return {
    name: error?.constructor?.name ?? 'Error',
    message: String(error?.message ?? error),
    code: error?.code ?? null,
    data: error?.data ?? null,
  };
}

const input = createInterface({ input: process.stdin });
input.on('line', (line) => {
  if (!line.trim()) return;
  const command = JSON.parse(line);
  if (command.op === 'authorization_code') {
    if (pendingCode) {
      const resolve = pendingCode;
      pendingCode = null;
      resolve(command.code);
    } else {
      codes.push(command.code);
    }
    return;
  }
  const op = ops[command.op];
  if (!op) {
    emit({ id: command.id, error: { name: 'UnknownOp', message: command.op } });
    return;
  }
  op(command).then(
    (result) => emit({ id: command.id, result: result ?? {} }),
    (error) => emit({ id: command.id, error: describe(error) }),
  );
});
input.on('close', async () => {
  try { if (client) await client.close(); } finally { process.exit(0); }
});
