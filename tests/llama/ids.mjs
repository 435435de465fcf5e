// ids.mjs MODEL.gguf N - llama.cpp's greedy token ids from BOS, N of them,
// on one line: the reference the GGUF tests compare the engine with. CPU
// only, prebuilt (never builds), as a user of node-llama-cpp gets it.
import {availableParallelism} from "node:os";
import {getLlama} from "node-llama-cpp";

const [, , path, count] = process.argv;
const n = Number(count);
if (!path || !(n > 0)) {
	console.error("usage: node ids.mjs MODEL.gguf N");
	process.exit(2);
}
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath: path});
// One thread per CPU, as llama.cpp's own tools default to: node-llama-cpp's
// default here ran more threads than the 2 vCPUs, and its spinning workers
// made each decode of the stories110M shape take ~1.3 s instead of ~10 ms.
const context = await model.createContext({
	contextSize: Math.min(n + 1, model.trainContextSize),
	threads: availableParallelism(),
});
const sequence = context.getSequence();
const ids = [];
for await (const token of sequence.evaluate([model.tokens.bos], {temperature: 0})) {
	ids.push(token);
	if (ids.length >= n)
		break;
}
console.log(ids.join(" "));
await context.dispose();
await model.dispose();
