// The official A2A JS SDK (@a2a-js/sdk, protocol 1.0) with its default client against agentry:
// one message (the weather) and one stream, in order. Run by tests/a2a.rs:
//   node a2a.mjs http://127.0.0.1:PORT/a2a/assistant/
// (the trailing slash: the SDK resolves `.well-known/agent-card.json` against the URL).
import { randomUUID } from 'node:crypto';
import assert from 'node:assert/strict';
import { ClientFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';

const BASE = process.argv[2];
const client = await new ClientFactory().createFromUrl(BASE);
const userMsg = (text) => ({ messageId: randomUUID(), role: Role.ROLE_USER,
  parts: [{ content: { $case: 'text', value: text } }] });

const task = await client.sendMessage({ message: userMsg('What is the weather in Paris?') });
assert.equal(task.status.state, TaskState.TASK_STATE_COMPLETED, JSON.stringify(task));
const answer = task.artifacts[0].parts[0].content.value;
assert.match(answer, /Paris/);
console.log('message:', answer);

const kinds = [];
let last;
for await (const ev of client.sendMessageStream({ message: userMsg('What is the weather in Rome?') })) {
  kinds.push(ev.payload.$case);
  last = ev.payload.value;
}
assert.equal(kinds[0], 'task', kinds.join(','));
assert.deepEqual(kinds.slice(-2), ['artifactUpdate', 'statusUpdate'], kinds.join(','));
assert.equal(last.status.state, TaskState.TASK_STATE_COMPLETED);
console.log('stream:', kinds.join(' '));
