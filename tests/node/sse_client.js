#!/usr/bin/env node
// sse_client.js - a lean streaming client, the witness for socket-level
// request times: N keep-alive connections, opened first, each sending a
// streaming completion per round, ROUNDS times. It writes each request on
// its connected socket itself (net, not http: node's http agent hands a
// freed socket over a tick later, and an SDK adds its own work between the
// clock and the socket, both of which the tracer rightly does not see).
// One JSON line per request: {round, index, sent_epoch_ms (just before the
// request's write), ttft_ms (to the first "data:" line read), total_ms (to
// the chunked body's end), events ("data:" lines, [DONE] included), status}.
//
//   node sse_client.js BASE_URL N ROUNDS MAX_TOKENS [PATH] [PROMPT_IDS]
// PATH defaults to /v1/completions; PROMPT_IDS=1 sends the prompt as token ids.
// CLIENT_KEEPALIVE=0: a new connection per request, opened before its clock
// starts (llama-server does not answer a second request on a connection
// that streamed). SSE_WARMUP=K: K rounds first, not reported (the client's
// own code is compiled on first use: that is no part of the server's time).
// SSE_PROMPT=TEXT: the prompt, with {i} the request's index and {r} its round
// (default "Once upon a time {i}"): twins of one length and last token.
'use strict';
const net = require('net');

const [base, nArg, roundsArg, maxArg, path = '/v1/completions', ids] = process.argv.slice(2);
const n = Number(nArg), rounds = Number(roundsArg), maxTokens = Number(maxArg);
if (!base || !(n > 0) || !(rounds > 0) || !(maxTokens > 0)) {
	console.error('usage: sse_client.js BASE_URL N ROUNDS MAX_TOKENS [PATH] [PROMPT_IDS]');
	process.exit(2);
}
const url = new URL(base);
const now = () => performance.timeOrigin + performance.now();

function connect() {
	return new Promise((resolve, reject) => {
		const s = net.connect(Number(url.port), url.hostname, () => resolve(s));
		s.setNoDelay(true);
		s.on('error', reject);
	});
}

// One request on socket s; resolves at the end of its chunked body.
function one(s, round, index) {
	const template = process.env.SSE_PROMPT || 'Once upon a time {i}';
	const prompt = ids === '1' ? [1, 400 + index, 500 + round]
		: template.replaceAll('{i}', String(index)).replaceAll('{r}', String(Math.max(round, 0)));
	const body = JSON.stringify({ prompt, max_tokens: maxTokens + index, temperature: 0, stream: true });
	const text = `POST ${path} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\n` +
		`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
	return new Promise((resolve, reject) => {
		const out = { round, index, events: 0 };
		let seen = '';
		const onData = (chunk) => {
			const t = now();
			seen += chunk.toString('latin1');
			if (out.status === undefined && seen.startsWith('HTTP/1.'))
				out.status = Number(seen.slice(9, 12));
			const lines = seen.split('\n');
			seen = lines.pop();
			for (const l of lines) {
				if (l.startsWith('data:') && !out.events++)
					out.ttft_ms = t - out.sent_epoch_ms;
				if (l === '0\r' && out.events) {   // the last chunk: the body ends
					out.total_ms = t - out.sent_epoch_ms;
					s.off('data', onData);
					resolve(out);
					return;
				}
			}
		};
		s.on('data', onData);
		s.once('error', reject);
		out.sent_epoch_ms = now();
		s.write(text);
	});
}

const fresh = process.env.CLIENT_KEEPALIVE === '0';

(async () => {
	let socks = await Promise.all(Array.from({ length: n }, connect));
	const warm = Math.max(0, Math.min(8, Number(process.env.SSE_WARMUP) || 0));
	for (let r = -warm; r < rounds; r++) {
		if (fresh && r > -warm)
			socks = await Promise.all(Array.from({ length: n }, connect));
		const results = await Promise.all(socks.map((s, i) => one(s, r, i)));
		for (const x of results)
			if (r >= 0)
				console.log(JSON.stringify(x));
		if (fresh)
			socks.forEach((s) => s.end());
	}
	if (!fresh)
		socks.forEach((s) => s.end());
})().catch((e) => {
	console.error(`sse_client: ${e.message}`);
	process.exit(1);
});
