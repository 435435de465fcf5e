#!/usr/bin/env node
// structured.js - structured output through two application frameworks, each
// validating the reply against its own zod schema (issue 58):
//
//   node structured.js BASE_URL
//
// The Vercel AI SDK's generateObject and streamObject (an OpenAI-compatible
// provider that asks for json_schema), and LangChain's ChatOpenAI
// withStructuredOutput (method jsonSchema), greedy and with seeds. Prints one
// JSON line per call: {framework, call, ok, object} or {framework, call, error}.
'use strict';
const { z } = require('zod');
const { generateObject, streamObject } = require('ai');
const { createOpenAICompatible } = require('@ai-sdk/openai-compatible');
const { ChatOpenAI } = require('@langchain/openai');

const base = process.argv[2];
const Person = z.object({
	name: z.string().max(12),
	age: z.number().int(),
	color: z.enum(['red', 'green', 'blue']),
	pets: z.array(z.string().max(6)).max(2),
});
const prompt = 'Describe a person as JSON.';

async function run(framework, call, fn) {
	try {
		const object = await fn();
		Person.parse(object); // the framework validated it; so do we
		console.log(JSON.stringify({ framework, call, ok: true, object }));
	} catch (e) {
		console.log(JSON.stringify({ framework, call, error: String(e && e.message || e).slice(0, 300) }));
	}
}

(async () => {
	const provider = createOpenAICompatible({ name: 'infer', baseURL: base + '/v1', apiKey: 'x',
		supportsStructuredOutputs: true });
	const model = provider.chatModel('demo');
	for (const seed of [undefined, 1, 2]) {
		const opts = { model, schema: Person, prompt, maxOutputTokens: 300, maxRetries: 0,
			temperature: seed === undefined ? 0 : 1, seed };
		await run('ai-sdk', `generateObject seed=${seed}`, async () => (await generateObject(opts)).object);
		await run('ai-sdk', `streamObject seed=${seed}`, async () => {
			const s = streamObject(opts);
			for await (const _ of s.partialObjectStream) { /* drain */ }
			return await s.object;
		});
		const chat = new ChatOpenAI({ model: 'demo', apiKey: 'x', configuration: { baseURL: base + '/v1' },
			temperature: seed === undefined ? 0 : 1, maxTokens: 300, maxRetries: 0,
			modelKwargs: seed === undefined ? {} : { seed } });
		await run('langchain', `withStructuredOutput seed=${seed}`,
			async () => chat.withStructuredOutput(Person, { method: 'jsonSchema', name: 'person' }).invoke(prompt));
	}
})();
