// Resuming a chat stream the way `useChat({ resume: true })` does, with the `ai` package's own
// Chat (AbstractChat) against agentry's `operator` agent:
//  1. a chat sends `refund order o-1 250 damaged box` and its connection drops after the first
//     CUT_AFTER server-sent events (the body errors with a network TypeError, as a browser's
//     does, and the socket is closed);
//  2. the same chat calls resumeStream(), i.e. transport.reconnectToStream({chatId}): GET
//     `${api}/${chatId}/stream`, which replays the run up to its approval request;
//  3. a new chat (a reloaded page holding only the user message) resumes the same way, answers the
//     approval and sends it, which completes the run;
//  4. once the run is over, resuming answers 204: reconnectToStream gives null, and a new chat's
//     resumeStream() leaves it empty and ready.
//
// Usage: node resume.mjs BASE_URL CHAT_ID [CUT_AFTER]   (CUT_AFTER defaults to 3 events)
// Prints {runId, dropped, resumed, reloaded, completed, afterCompletion, requests} as JSON.
import { Chat, agentryTransport, toolPart } from './chat-client.mjs';

const [base, chatId, cutAfterArg = '3'] = process.argv.slice(2);
const cutAfter = Number(cutAfterArg);
if (!base || !chatId || !(cutAfter >= 1)) {
  console.error('usage: node resume.mjs BASE_URL CHAT_ID [CUT_AFTER]');
  process.exit(2);
}
const text = 'refund order o-1 250 damaged box';
const requests = [];

/** Passes the first `events` server-sent events of `body` on, then drops the connection. */
function cutShort(body, events) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let buffered = '';
  let passed = 0;
  return new ReadableStream({
    async pull(controller) {
      for (;;) {
        const end = buffered.indexOf('\n\n');
        if (end !== -1) {
          controller.enqueue(encoder.encode(buffered.slice(0, end + 2)));
          buffered = buffered.slice(end + 2);
          passed += 1;
          if (passed === events) {
            await reader.cancel();
            controller.error(new TypeError('network error'));
          }
          return;
        }
        const { done, value } = await reader.read();
        if (done) {
          throw new Error(`the stream ended after ${passed} events, before the cut`);
        }
        buffered += decoder.decode(value, { stream: true });
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
}

function fail(what, detail) {
  throw new Error(`${what}: ${typeof detail === 'string' ? detail : JSON.stringify(detail)}`);
}

// 1. The first request's body is cut short.
const errors = [];
const finishes = [];
let cut = false;
const chat = new Chat({
  id: chatId,
  transport: agentryTransport({
    base,
    agent: 'operator',
    requests,
    wrapBody: (body, request) => {
      if (cut || request.method !== 'POST') return body;
      cut = true;
      return cutShort(body, cutAfter);
    },
  }),
  onError: (e) => errors.push(e),
  onFinish: ({ isDisconnect, isError, isAbort }) => finishes.push({ isDisconnect, isError, isAbort }),
});
await chat.sendMessage({ text });
const runId = requests[0]?.runId;
const dropped = {
  status: chat.status,
  error: chat.error?.message,
  finish: finishes[0],
  messages: structuredClone(chat.messages),
};
if (chat.status !== 'error' || !finishes[0]?.isDisconnect) {
  fail('the dropped connection was not seen as a disconnect', dropped);
}

// 2. The same chat resumes.
errors.length = 0;
await chat.resumeStream();
if (errors.length > 0 || chat.status !== 'ready') fail('resuming', errors[0]?.stack ?? chat.status);
const resumed = structuredClone(chat.messages);
if (toolPart(chat.lastMessage, 'issue_refund')?.state !== 'approval-requested') {
  fail('the resumed chat does not wait for the approval', resumed);
}

// 3. A reloaded page: a new chat with the persisted user message resumes, then answers.
const reloadedErrors = [];
const reloadedChat = new Chat({
  id: chatId,
  messages: [structuredClone(chat.messages[0])],
  transport: agentryTransport({ base, agent: 'operator', requests }),
  onError: (e) => reloadedErrors.push(e),
});
await reloadedChat.resumeStream();
if (reloadedErrors.length > 0 || reloadedChat.status !== 'ready') {
  fail('resuming after a reload', reloadedErrors[0]?.stack ?? reloadedChat.status);
}
const reloaded = structuredClone(reloadedChat.messages);
const pending = toolPart(reloadedChat.lastMessage, 'issue_refund');
if (pending?.state !== 'approval-requested') fail('the reloaded chat does not wait', reloaded);
await reloadedChat.addToolApprovalResponse({ id: pending.approval.id, approved: true });
await reloadedChat.sendMessage();
if (reloadedErrors.length > 0 || reloadedChat.status !== 'ready') {
  fail('answering the approval', reloadedErrors[0]?.stack ?? reloadedChat.status);
}
const completed = structuredClone(reloadedChat.messages);

// 4. The run is over: nothing to resume.
const transport = agentryTransport({ base, agent: 'operator', requests });
const stream = await transport.reconnectToStream({ chatId });
const lateErrors = [];
const lateChat = new Chat({ id: chatId, transport, onError: (e) => lateErrors.push(e) });
await lateChat.resumeStream();
const afterCompletion = {
  reconnectToStream: stream,
  status: lateChat.status,
  error: lateErrors[0]?.message,
  messages: lateChat.messages,
};

process.stdout.write(
  JSON.stringify({ runId, dropped, resumed, reloaded, completed, afterCompletion, requests }) + '\n',
);
