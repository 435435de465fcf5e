#!/usr/bin/env node
// frameworks.js - the HTTP engine through two application frameworks (issue 58):
//
//   node frameworks.js BASE_URL
//
// Plain chat: the Vercel AI SDK's generateText and streamText (an
// OpenAI-compatible provider) and LangChain's ChatOpenAI invoke and stream,
// greedy: {framework, call, ok, text}. Structured output, each framework
// validating the reply against its own zod schema: the AI SDK's
// generateObject and streamObject (json_schema) and LangChain's
// withStructuredOutput (method jsonSchema), greedy and with seeds:
// {framework, call, ok, object}. A failed call: {framework, call, error}.
'use strict';
const { z } = require('zod');
const { generateObject, generateText, streamObject, streamText } = require('ai');
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

async function text(framework, call, fn) {
	try {
		console.log(JSON.stringify({ framework, call, ok: true, text: await fn() }));
	} catch (e) {
		console.log(JSON.stringify({ framework, call, error: String(e && e.message || e).slice(0, 300) }));
	}
}

async function plain(model) {
	const opts = { model, prompt: 'Tell me a story', maxOutputTokens: 12, temperature: 0, maxRetries: 0 };
	await text('ai-sdk', 'generateText', async () => (await generateText(opts)).text);
	await text('ai-sdk', 'streamText', async () => {
		let t = '';
		for await (const d of streamText(opts).textStream) t += d;
		return t;
	});
	const chat = new ChatOpenAI({ model: 'demo', apiKey: 'x', configuration: { baseURL: base + '/v1' },
		temperature: 0, maxTokens: 12, maxRetries: 0 });
	await text('langchain', 'invoke', async () => (await chat.invoke('Tell me a story')).content);
	await text('langchain', 'stream', async () => {
		let t = '';
		for await (const c of await chat.stream('Tell me a story')) t += c.content;
		return t;
	});
}

(async () => {
	const provider = createOpenAICompatible({ name: 'infer', baseURL: base + '/v1', apiKey: 'x',
		supportsStructuredOutputs: true });
	const model = provider.chatModel('demo');
	await plain(model);
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
