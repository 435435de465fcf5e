#!/usr/bin/env node
// openai_seq.js BASE_URL N - N streaming chat completions, one after the
// other, through the official openai client with its default keep-alive
// agent. Prints {"requests": N, "chunks": C}: C counts the chunks the
// client got, so the events on the wire are C + N ("data: [DONE]" each).
'use strict';
const OpenAI = require('openai');
const [base, nArg] = process.argv.slice(2);
const n = Number(nArg);
if (!base || !(n > 0)) {
	console.error('usage: openai_seq.js BASE_URL N');
	process.exit(2);
}
(async () => {
	const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'none', maxRetries: 0 });
	let chunks = 0;
	for (let i = 0; i < n; i++) {
		const stream = await client.chat.completions.create({
			model: 'm', stream: true, messages: [{ role: 'user', content: `hello ${i}` }],
		});
		for await (const c of stream) if (c.choices) chunks++;
	}
	console.log(JSON.stringify({ requests: n, chunks }));
})().catch((e) => { console.error(String(e)); process.exit(1); });
