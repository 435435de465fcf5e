// generate.mjs MODEL.gguf CONTEXT PROMPT_TOKENS OUTPUTS - a node-llama-cpp
// program to trace (and a benchmark's load): a prompt of PROMPT_TOKENS ids (BOS, then ids 100, 101,
// ...) in a context of CONTEXT cells, then greedy outputs until OUTPUTS.
// Prints what the program itself counted, as one JSON line: the ids,
// node-llama-cpp's token meter (input tokens it evaluated, outputs), and
// the KV cache size line llama.cpp logs. With GENERATE_WAIT=FILE it waits
// for FILE to exist before generating (for a tracer attaching by pid).
import {getLlama} from "node-llama-cpp";

const [, , path, ctxArg, promptArg, outArg] = process.argv;
const contextSize = Number(ctxArg), promptTokens = Number(promptArg), outputs = Number(outArg);
if (!path || !(contextSize > 0) || !(promptTokens > 0) || !(outputs > 0)) {
	console.error("usage: node generate.mjs MODEL.gguf CONTEXT PROMPT_TOKENS OUTPUTS");
	process.exit(2);
}
import {existsSync, readFileSync} from "node:fs";
import {setTimeout as sleep} from "node:timers/promises";
import {LlamaLogLevel} from "node-llama-cpp";

const kvLines = [];
const llama = await getLlama({
	gpu: false, build: "never", logLevel: LlamaLogLevel.info,
	logger: (level, message) => {
		if (/llama_kv_cache: +size =/.test(message))
			kvLines.push(message.trim());
	},
});
const model = await llama.loadModel({modelPath: path});
// GENERATE_THREADS: llama.cpp threads (default 1: the tests share 2 vCPUs with the tracer)
const threads = Number(process.env.GENERATE_THREADS || 1);
const context = await model.createContext({contextSize, sequences: 1, threads});
const sequence = context.getSequence();
const prompt = [model.tokens.bos];
for (let i = 1; i < promptTokens; i++)
	prompt.push(100 + i);
if (process.env.GENERATE_WAIT) {
	console.error(`waiting for ${process.env.GENERATE_WAIT}`);
	while (!existsSync(process.env.GENERATE_WAIT))
		await sleep(50);
}
const ids = [];
let first = 0, last = 0;
for await (const token of sequence.evaluate(prompt, {temperature: 0})) {
	last = performance.now();
	if (!ids.length)
		first = last;
	ids.push(token);
	if (ids.length >= outputs)
		break;
}
const meter = sequence.tokenMeter.getState();
console.log(JSON.stringify({ids, input_tokens: meter.usedInputTokens, output_tokens: meter.usedOutputTokens,
	context_size: context.contextSize, kv_log: kvLines,
	// the ggml CPU variant ggml picked for this CPU (it decides the speed)
	cpu_variant: (readFileSync("/proc/self/maps", "utf8").match(/libggml-cpu-([\w-]+)\.so/) ?? [])[1] ?? null,
	// its own decode rate: outputs after the first over the time they took
	decode_tokens_per_s: ids.length > 1 ? (ids.length - 1) / ((last - first) / 1000) : null}));
await context.dispose();
await model.dispose();
