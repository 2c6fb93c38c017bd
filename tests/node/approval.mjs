// The tool-approval round trip of a `useChat` client, run with the `ai` package's own Chat
// (AbstractChat) against agentry's `operator` agent: the refund's `issue_refund` call stops at
// `approval-requested`; the client answers with addToolApprovalResponse and sends the answer
// either by itself (sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses)
// or with sendMessage(); the continuation completes the same assistant message.
//
// Usage: node approval.mjs BASE_URL MODE CHAT_ID [SEND] [REASON]
//   MODE approve|deny, SEND auto (default) | manual, REASON the denial's reason (default "too much").
// Prints {requested, messages, requests} as JSON: the assistant message when the approval was
// requested, the chat's final messages, and the HTTP requests made.
import { lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import { Chat, agentryTransport, toolPart, waitFor } from './chat-client.mjs';

const [base, mode, chatId, send = 'auto', reason = 'too much'] = process.argv.slice(2);
if (!['approve', 'deny'].includes(mode) || !chatId || !['auto', 'manual'].includes(send)) {
  console.error('usage: node approval.mjs BASE_URL approve|deny CHAT_ID [auto|manual] [REASON]');
  process.exit(2);
}

const requests = [];
const errors = [];
let finished = 0;
const chat = new Chat({
  id: chatId,
  transport: agentryTransport({ base, agent: 'operator', requests }),
  sendAutomaticallyWhen:
    send === 'auto' ? lastAssistantMessageIsCompleteWithApprovalResponses : undefined,
  onError: (e) => errors.push(e),
  onFinish: () => {
    finished += 1;
  },
});

function check(what) {
  if (errors.length > 0 || chat.status === 'error') {
    throw new Error(`${what}: ${errors[0]?.stack ?? chat.error?.stack ?? chat.status}`);
  }
}

await chat.sendMessage({ text: 'refund order o-1 250 damaged box' });
check('the first turn');
const requested = structuredClone(chat.lastMessage);
const part = toolPart(requested, 'issue_refund');
if (part?.state !== 'approval-requested') {
  throw new Error(`issue_refund is not waiting for approval: ${JSON.stringify(requested)}`);
}

await chat.addToolApprovalResponse({
  id: part.approval.id,
  approved: mode === 'approve',
  ...(mode === 'deny' ? { reason } : {}),
});
if (send === 'manual') {
  await chat.sendMessage();
} else {
  // addToolApprovalResponse starts the automatic request without awaiting it.
  await waitFor(() => finished >= 2 && chat.status !== 'submitted' && chat.status !== 'streaming',
    'the automatic send of the approval answer');
}
check('the continuation');

process.stdout.write(JSON.stringify({ requested, messages: chat.messages, requests }) + '\n');
