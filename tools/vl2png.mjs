// vl2png.mjs - renders a Vega-Lite spec (stdin) to PNG or SVG (stdout) with
// the official vega-lite compiler, vega's headless SVG renderer and resvg
// (a binary shipped in its npm package; node-canvas would need a download).
// Usage: node tools/vl2png.mjs [png|svg] [scale] < spec.json > out
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '..', 'tests', 'node', 'package.json'));
const vega = await import(require.resolve('vega'));
const vl = await import(require.resolve('vega-lite'));
const { Resvg } = require('@resvg/resvg-js');

const format = process.argv[2] || 'png';
const scale = Number(process.argv[3] || 1);
let text = '';
for await (const chunk of process.stdin) text += chunk;
const spec = JSON.parse(text);
const compiled = spec.$schema && spec.$schema.includes('/vega/') ? spec : vl.compile(spec).spec;
const view = new vega.View(vega.parse(compiled), { renderer: 'none' });
const svg = await view.toSVG(scale);
view.finalize();
if (format === 'svg') {
	process.stdout.write(svg);
} else {
	// resvg draws text only with fonts it was given; Debian's DejaVu is always there.
	const png = new Resvg(svg, { background: 'white', font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans' } }).render().asPng();
	process.stdout.write(png);
}
