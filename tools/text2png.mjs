// text2png.mjs - renders a terminal frame (stdin, plain text) to a PNG
// (stdout) as a dark terminal would show it: an SVG of monospace lines,
// drawn by resvg (npm, tests/node) with Debian's DejaVu Sans Mono.
// Usage: node tools/text2png.mjs [title] < frame.txt > frame.png
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '..', 'tests', 'node', 'package.json'));
const { Resvg } = require('@resvg/resvg-js');

let text = '';
for await (const chunk of process.stdin) text += chunk;
const lines = text.replace(/\s+$/, '').split('\n');
const cell = { w: 8.4, h: 17 }, pad = 12;
const cols = Math.max(...lines.map((l) => l.length), 40);
const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const width = Math.ceil(cols * cell.w + 2 * pad), height = Math.ceil(lines.length * cell.h + 2 * pad);
const rows = lines.map((l, i) => {
	const head = i === 0 ? ' font-weight="bold" fill="#8fd18f"' : /^\s*NAME\s/.test(l) ? ' fill="#9ecbff"' : '';
	return `<text x="${pad}" y="${pad + (i + 0.8) * cell.h}" xml:space="preserve"${head}>${esc(l)}</text>`;
});
const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">
<rect width="100%" height="100%" fill="#1e1e1e"/>
<g font-family="DejaVu Sans Mono" font-size="14" fill="#e0e0e0">${rows.join('\n')}</g></svg>`;
const png = new Resvg(svg, { font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans Mono' } }).render().asPng();
process.stdout.write(png);
