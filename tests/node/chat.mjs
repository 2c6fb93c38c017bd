// Sends one user message to agentry's /chat through the `ai` package's DefaultChatTransport
// (exactly what useChat does) and assembles the streamed reply with readUIMessageStream.
// Usage: node chat.mjs BASE_URL AGENT_ID TEXT   -> prints the assembled UIMessage as JSON.
import { DefaultChatTransport, readUIMessageStream } from 'ai';

const [base, agent, text] = process.argv.slice(2);
const transport = new DefaultChatTransport({
  api: `${base}/agents/${agent}/chat`,
  // A chat client sends only the last message; agentry keeps the history in its memory.
  prepareSendMessagesRequest: ({ messages }) => ({
    body: { input: [messages[messages.length - 1]], options: { userId: 'node', conversationId: 'ai-sdk' } },
  }),
});
const stream = await transport.sendMessages({
  chatId: 'ai-sdk',
  trigger: 'submit-message',
  messageId: undefined,
  messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text }] }],
  abortSignal: undefined,
});
let last;
for await (const message of readUIMessageStream({ stream, onError: (e) => { throw e; } })) {
  last = message;
}
process.stdout.write(JSON.stringify(last) + '\n');
