// ids.mjs MODEL.gguf N - llama.cpp's greedy token ids from BOS, N of them,
// on one line: the reference the GGUF tests compare the engine with. CPU
// only, prebuilt (never builds), as a user of node-llama-cpp gets it.
import {getLlama} from "node-llama-cpp";

const [, , path, count] = process.argv;
const n = Number(count);
if (!path || !(n > 0)) {
	console.error("usage: node ids.mjs MODEL.gguf N");
	process.exit(2);
}
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath: path});
const context = await model.createContext({contextSize: Math.min(n + 1, model.trainContextSize)});
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
