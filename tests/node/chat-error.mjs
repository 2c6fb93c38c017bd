// Sends one user message to agentry's /chat through the `ai` package's DefaultChatTransport and
// reads the streamed reply with readUIMessageStream, keeping the stream's error instead of
// throwing it.
// Usage: node chat-error.mjs BASE_URL AGENT_ID TEXT   -> prints {error, text} as JSON.
import { DefaultChatTransport, readUIMessageStream } from 'ai';

const [base, agent, text] = process.argv.slice(2);
const transport = new DefaultChatTransport({ api: `${base}/agents/${agent}/chat` });
const stream = await transport.sendMessages({
  chatId: 'guardrails',
  trigger: 'submit-message',
  messageId: undefined,
  messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text }] }],
  abortSignal: undefined,
});
let error = null;
let last;
for await (const message of readUIMessageStream({ stream, onError: (e) => { error = String(e?.message ?? e); } })) {
  last = message;
}
const said = (last?.parts ?? []).filter((p) => p.type === 'text').map((p) => p.text).join('');
process.stdout.write(JSON.stringify({ error, text: said }) + '\n');
