// Server-Sent Events over fetch. `EventSource` cannot send an Authorization header (nor a
// body, which the chat needs), so streams are read with fetch and parsed here, following the
// HTML standard's event stream rules: lines end with CRLF, LF or CR; `data:` lines join with
// newlines; `id:`, `event:`; lines starting with `:` are comments (keep-alives); a blank line
// dispatches the event.

import { request } from "./api.js";

/**
 * Reads an SSE body and calls `onEvent({data, event, id, ownId})` for every event, in order:
 * `id` is the last event id seen (the stream's position), `ownId` whether this event set it.
 * Resolves when the stream ends; rejects with an AbortError when `signal` aborts.
 */
export async function readEvents(body, onEvent, signal) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let data = [];
  let event = "";
  let id = null; // the last event id (it carries over to later events, as in EventSource)
  let ownId = false; // whether the event being read named an id itself
  const onAbort = () => reader.cancel().catch(() => {});
  signal?.addEventListener("abort", onAbort, { once: true });

  const line = (text) => {
    if (text === "") {
      if (data.length) onEvent({ data: data.join("\n"), event: event || "message", id, ownId });
      data = [];
      event = "";
      ownId = false;
      return;
    }
    if (text.startsWith(":")) return;
    const colon = text.indexOf(":");
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
    else if (field === "event") event = value;
    else if (field === "id" && !value.includes("\0")) {
      id = value;
      ownId = true;
    }
  };

  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (signal?.aborted) throw new DOMException("Aborted", "AbortError");
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      // Split off every complete line; a CR at the very end may be half of a CRLF.
      let start = 0;
      for (let i = 0; i < buffer.length; i++) {
        const c = buffer[i];
        if (c === "\n" || c === "\r") {
          if (c === "\r" && i === buffer.length - 1) break;
          line(buffer.slice(start, i));
          if (c === "\r" && buffer[i + 1] === "\n") i++;
          start = i + 1;
        }
      }
      buffer = buffer.slice(start);
    }
    buffer += decoder.decode();
    if (buffer) line(buffer);
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * Opens an SSE stream of the API (with the session's token) and reads it to its end.
 * Options are `request`'s (`method`, `body`, `headers`, `signal`); a failure before the stream
 * starts throws its ApiError (with the server's message).
 */
export async function stream(path, options, onEvent) {
  const response = await request(path, {
    ...options,
    headers: { Accept: "text/event-stream", ...(options.headers || {}) },
  });
  await readEvents(response.body, onEvent, options.signal);
}
