// A Node `Chat`: the `ai` package's own `AbstractChat` (what `useChat` wraps) with a plain
// in-memory `ChatState`, the React one minus React, and a `DefaultChatTransport` configured for
// agentry's `/agents/:id/chat`. Used by approval.mjs and resume.mjs.
import { AbstractChat, DefaultChatTransport } from 'ai';

/** The `ChatState` of @ai-sdk/react's `Chat`, without the change callbacks. */
class NodeChatState {
  constructor(messages = []) {
    this.messages = messages;
    this.status = 'ready';
    this.error = undefined;
  }
  pushMessage = (message) => {
    this.messages = this.messages.concat(message);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index, message) => {
    this.messages = [
      ...this.messages.slice(0, index),
      this.snapshot(message),
      ...this.messages.slice(index + 1),
    ];
  };
  snapshot = (value) => structuredClone(value);
}

export class Chat extends AbstractChat {
  constructor({ messages, ...init }) {
    super({ ...init, state: new NodeChatState(messages) });
  }
}

/**
 * A transport for `${base}/agents/${agent}/chat`. agentry keeps the history itself, so a request
 * carries only the last message (a user message, or the assistant message holding the approval
 * answers) and the chat id as the conversation id. The reconnect URL is the package's default,
 * `${api}/${chatId}/stream`, i.e. agentry's `/agents/:id/chat/:conversationId/stream`.
 *
 * Every request is logged into `requests` ({method, url, body, status, runId}). `wrapBody(body, request)`, when
 * given, may replace a response body (to cut a stream short).
 */
export function agentryTransport({ base, agent, requests = [], wrapBody }) {
  return new DefaultChatTransport({
    api: `${base}/agents/${agent}/chat`,
    prepareSendMessagesRequest: ({ id, messages }) => ({
      body: {
        messages: [messages[messages.length - 1]],
        options: { conversationId: id, userId: 'node' },
      },
    }),
    fetch: async (url, init) => {
      const request = { method: init?.method ?? 'GET', url: String(url) };
      if (typeof init?.body === 'string') request.body = JSON.parse(init.body);
      requests.push(request);
      const response = await fetch(url, init);
      request.status = response.status;
      request.runId = response.headers.get('x-run-id') ?? undefined;
      if (wrapBody && response.body) {
        const body = wrapBody(response.body, request);
        if (body !== response.body) {
          return new Response(body, { status: response.status, headers: response.headers });
        }
      }
      return response;
    },
  });
}

/** Resolves once `predicate()` holds, polling; rejects after `ms`. */
export async function waitFor(predicate, what, ms = 20000) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The part of `message` for the tool `name` (type `tool-${name}`). */
export function toolPart(message, name) {
  return message?.parts.find((p) => p.type === `tool-${name}`);
}
