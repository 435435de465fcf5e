#!/usr/bin/env node
// client.js - drives `infer --http` with the official OpenAI client (npm `openai`).
//
//   node client.js BASE_URL run SPEC.json     run SPEC's requests, print one JSON result per line
//   node client.js BASE_URL models            print client.models.list() as JSON
//   node client.js BASE_URL bench SPEC.json   run SPEC, print one summary line: wall_ms,
//                                             completion_tokens, ttft_ms[], errors
//
// SPEC: {"concurrent": bool, "stagger_ms": MS, "warmup": N, "requests": [{...params..., "abort_after": N}]}
// (warmup: N short requests of warmup_prompt, or the first prompt, first; not reported).
// Each request takes OpenAI's fields (prompt, max_tokens, temperature, top_p, seed, stop,
// stream); a request with "messages" is a chat: client.chat.completions.create, its
// result with role, object, the text as .text, and chunk_objects (each chunk's object);
// "abort_after" (streaming only) closes the stream after N chunks, as a client
// that goes away. A result: {index, text, token_ids, finish_reason, usage, chunks,
// done (the SDK's iterator ended, which it does alike on [DONE] and on the body's end:
// serve_lib.sh's wire_done checks [DONE] itself), ttft_ms, gaps_ms, total_ms, sent_epoch_ms,
// first_chunk_epoch_ms (wall clock, to line up with a tracer)} or {index, status, error}.
'use strict';
const fs = require('fs');
const OpenAI = require('openai');

const [base, mode, arg] = process.argv.slice(2);
if (!base || !mode) {
	console.error('usage: client.js BASE_URL run SPEC.json | models');
	process.exit(2);
}
// No retries: a test must see every failure. CLIENT_KEEPALIVE=0: a new
// connection per request (llama-server fails the request that follows a
// streamed response on the same connection: "Connection error").
const http = require('http');
const httpAgent = process.env.CLIENT_KEEPALIVE === '0' ? new http.Agent({ keepAlive: false }) : undefined;
const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 300000, httpAgent });

async function streamed(params, abortAfter, t0) {
	const stream = await client.completions.create({ ...params, stream: true });
	const out = { text: '', token_ids: [], finish_reason: null, usage: null, chunks: 0, gaps_ms: [], chunk_tokens: [] };
	let last = null;
	for await (const chunk of stream) {
		const now = performance.now();
		const c = chunk.choices[0];
		if (out.chunks === 0) {
			out.ttft_ms = now - t0;
			out.first_chunk_epoch_ms = performance.timeOrigin + now;
		}
		else out.gaps_ms.push(now - last);
		last = now;
		out.chunks++;
		out.text += c.text;
		if (c.token_ids) out.token_ids.push(...c.token_ids);
		out.chunk_tokens.push(c.token_ids ? c.token_ids.length : 0);
		if (c.finish_reason) out.finish_reason = c.finish_reason;
		if (chunk.usage) out.usage = chunk.usage;
		if (chunk.timings) out.timings = chunk.timings; // llama-server's own figures
		if (abortAfter && out.chunks >= abortAfter) {
			stream.controller.abort();
			out.aborted = true;
			return out;
		}
	}
	out.done = true; // the iterator ended: on [DONE] or the body's end, it does not say which
	return out;
}

// A chat stream: the deltas' content joined, the first delta's role, the
// finish reason, and usage from its own last chunk (stream_options.include_usage).
async function streamedChat(params, t0) {
	const stream = await client.chat.completions.create({ ...params, stream: true });
	const out = { text: '', role: null, finish_reason: null, usage: null, chunks: 0, chunk_objects: [] };
	for await (const chunk of stream) {
		const now = performance.now();
		if (out.chunks === 0) out.ttft_ms = now - t0;
		out.chunks++;
		out.chunk_objects.push(chunk.object);
		out.id = chunk.id;
		if (chunk.usage) out.usage = chunk.usage;
		const c = chunk.choices[0];
		if (!c) continue;
		if (c.delta.role && !out.role) out.role = c.delta.role;
		if (c.delta.content) out.text += c.delta.content;
		if (c.finish_reason) out.finish_reason = c.finish_reason;
	}
	out.done = true;
	return out;
}

async function chat(params, t0) {
	if (params.stream) return streamedChat(params, t0);
	const r = await client.chat.completions.create(params);
	const c = r.choices[0];
	return { text: c.message.content, role: c.message.role, finish_reason: c.finish_reason,
		usage: r.usage, object: r.object, id: r.id, choices: r.choices.length };
}

async function one(req, index) {
	const { abort_after: abortAfter, ...params } = req;
	params.model = params.model || 'model';
	const t0 = performance.now();
	const sent_epoch_ms = performance.timeOrigin + t0;
	try {
		let out;
		if (params.messages) {
			out = await chat(params, t0);
		} else if (params.stream) {
			out = await streamed(params, abortAfter, t0);
		} else {
			const r = await client.completions.create(params);
			const c = r.choices[0];
			out = { text: c.text, token_ids: c.token_ids, finish_reason: c.finish_reason, usage: r.usage,
				object: r.object, id: r.id, timings: r.timings };
		}
		return { index, ...out, sent_epoch_ms, total_ms: performance.now() - t0 };
	} catch (e) {
		if (e.name === 'AbortError' || e instanceof OpenAI.APIUserAbortError) return { index, aborted: true };
		return { index, status: e.status === undefined ? null : e.status, error: e.message };
	}
}

async function main() {
	if (mode === 'models') {
		const list = await client.models.list();
		console.log(JSON.stringify(list.data));
		return;
	}
	if (mode !== 'run' && mode !== 'bench') throw new Error('unknown mode ' + mode);
	const spec = JSON.parse(fs.readFileSync(arg, 'utf8'));
	// Warm-up requests, not reported: the first requests of a node process
	// pay for JIT compilation and new connections, not for the server.
	for (let i = 0; i < (spec.warmup || 0); i++)
		await one({ prompt: spec.warmup_prompt || spec.requests[0].prompt, max_tokens: 2, temperature: 0, stream: true }, -1);
	const t0 = performance.now();
	let results;
	if (spec.concurrent) {
		// stagger_ms: request i starts i * stagger_ms after the first, as
		// arrivals spread over time, so that the client's own per-request
		// set-up work is not counted in every request's TTFT at once.
		const stagger = spec.stagger_ms || 0;
		const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
		results = await Promise.all(spec.requests.map((r, i) => sleep(i * stagger).then(() => one(r, i))));
	} else {
		results = [];
		for (let i = 0; i < spec.requests.length; i++) results.push(await one(spec.requests[i], i));
	}
	if (mode === 'bench') {
		const ok = results.filter((r) => r.usage);
		console.log(JSON.stringify({
			wall_ms: performance.now() - t0,
			completion_tokens: ok.reduce((n, r) => n + r.usage.completion_tokens, 0),
			ttft_ms: ok.filter((r) => r.ttft_ms !== undefined).map((r) => r.ttft_ms),
			errors: results.length - ok.length,
		}));
		return;
	}
	for (const r of results) console.log(JSON.stringify(r));
}

main().catch((e) => {
	console.error('client.js: ' + (e.stack || e));
	process.exit(1);
});
