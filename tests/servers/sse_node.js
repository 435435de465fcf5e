#!/usr/bin/env node
// sse_node.js PORT - a streaming chat-completions server on Node's own http
// module, as OpenAI-compatible gateways write it: CHUNKS chunks (default 8)
// with res.write, the last chunk and "data: [DONE]" with res.end (one
// writev of many iovecs), keep-alive on. Prints "listening PORT".
'use strict';
const http = require('http');
const port = Number(process.argv[2]);
const chunks = Number(process.env.CHUNKS || 8);
const chunk = (i, finish) => 'data: ' + JSON.stringify({
	id: 'c1', object: 'chat.completion.chunk', created: 0, model: 'm',
	choices: [{ index: 0, delta: finish ? {} : { content: `tok${i} ` }, finish_reason: finish ? 'stop' : null }],
}) + '\n\n';
http.createServer((req, res) => {
	req.resume();
	req.on('end', () => {
		res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
		let i = 0;
		const next = () => {
			if (i < chunks) { res.write(chunk(i++, false)); setTimeout(next, 2); return; }
			res.end(chunk(i, true) + 'data: [DONE]\n\n');
		};
		next();
	});
}).listen(port, '127.0.0.1', () => console.log(`listening ${port}`));
