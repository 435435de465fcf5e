// ids.mjs MODEL.gguf N [MODEL.gguf...] - llama.cpp's greedy token ids from
// BOS, N of them, on one line per model (one process for many models: the
// library's start-up is most of a small model's time): the reference the
// GGUF tests compare the engine with. CPU
// only, prebuilt (never builds). Stderr names the ggml CPU variant that ran
// ("llama.cpp CPU variant: NAME"), read from the process's own mappings.
// LLAMA_CPU_VARIANT=reference (the default) loads tests/llama/ref, one
// variant on every host (tools/llama_reference.sh); =best loads the variant
// ggml picks for this host, as a user of node-llama-cpp gets it.
import {readFileSync} from "node:fs";
import {availableParallelism} from "node:os";

const which = process.env.LLAMA_CPU_VARIANT || "reference";
if (which !== "reference" && which !== "best") {
	console.error(`ids.mjs: LLAMA_CPU_VARIANT '${which}': expected reference or best`);
	process.exit(2);
}
const {getLlama} = await import(which === "best" ? "node-llama-cpp"
	: new URL("./ref/node_modules/node-llama-cpp/dist/index.js", import.meta.url).href)
	.catch((e) => {
		console.error(`ids.mjs: no llama.cpp ${which} (make deps runs tools/llama_reference.sh): ${e.message}`);
		process.exit(1);
	});

const [, , first, count, ...more] = process.argv;
const n = Number(count);
if (!first || !(n > 0)) {
	console.error("usage: node ids.mjs MODEL.gguf N [MODEL.gguf...]");
	process.exit(2);
}
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});

// greedyIds(path): the model's first n greedy ids from BOS.
async function greedyIds(path) {
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
	await context.dispose();
	await model.dispose();
	return ids;
}

for (const path of [first, ...more]) {
	const ids = await greedyIds(path);
	// the backends are loaded with the first model: name the one CPU variant
	if (path === first) {
		const variants = [...new Set(readFileSync("/proc/self/maps", "utf8").match(/libggml-cpu-[\w-]+\.so/g) ?? [])];
		if (variants.length !== 1) {
			console.error(`ids.mjs: expected one ggml CPU variant loaded, found ${variants.join(", ") || "none"}`);
			process.exit(1);
		}
		console.error(`llama.cpp CPU variant: ${variants[0].slice("libggml-cpu-".length, -3)}`);
	}
	console.log(ids.join(" "));
}
