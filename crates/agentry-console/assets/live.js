// Keeping views live: polling while the tab is visible, and a shared one-second clock for
// countdowns. Both stop with the view (its AbortSignal).

import { duration } from "./dom.js";

/**
 * Calls `fn` every `ms` while the tab is visible, never twice at once, until `signal` aborts.
 * When the tab becomes visible again it calls `fn` at once. Errors are given to `onError`
 * (default: ignored; the next round tries again).
 */
export function poll(fn, ms, signal, onError = () => {}) {
  let timer = null;
  let running = false;
  const schedule = () => {
    clearTimeout(timer);
    if (!signal.aborted && document.visibilityState === "visible") timer = setTimeout(tick, ms);
  };
  const tick = async () => {
    if (signal.aborted || running) return;
    running = true;
    try {
      await fn();
    } catch (e) {
      if (e.name !== "AbortError") onError(e);
    } finally {
      running = false;
      schedule();
    }
  };
  const onVisibility = () => {
    if (document.visibilityState === "visible") tick();
    else clearTimeout(timer);
  };
  document.addEventListener("visibilitychange", onVisibility);
  signal.addEventListener("abort", () => {
    clearTimeout(timer);
    document.removeEventListener("visibilitychange", onVisibility);
  });
  schedule();
  return { now: tick };
}

/** Calls `fn` every second until `signal` aborts (countdowns, elapsed times). */
export function everySecond(fn, signal) {
  const timer = setInterval(fn, 1000);
  signal.addEventListener("abort", () => clearInterval(timer));
  fn();
}

/** `in 1 min 5 s` / `2 s ago`, for a deadline. */
export function untilText(iso, now = Date.now()) {
  const ms = new Date(iso).getTime() - now;
  const abs = Math.abs(ms);
  const s = Math.floor(abs / 1000);
  let text;
  if (s < 60) text = `${s} s`;
  else if (s < 3600) text = `${Math.floor(s / 60)} min ${s % 60} s`;
  else if (s < 172800) text = `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  else text = `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  return ms >= 0 ? `in ${text}` : `passed ${text} ago`;
}

/**
 * A countdown to `iso`, updated every second while `signal` lives: `<span class=countdown>`.
 */
export function countdown(iso, signal) {
  const el = document.createElement("span");
  el.className = "countdown";
  everySecond(() => {
    const text = untilText(iso);
    if (el.textContent !== text) el.textContent = text;
  }, signal);
  return el;
}

/**
 * The time since `iso` (a wait), updated every second while `signal` lives:
 * `<span class=elapsed>`.
 */
export function elapsed(iso, signal) {
  const el = document.createElement("span");
  el.className = "elapsed nums";
  const since = new Date(iso).getTime();
  everySecond(() => {
    const text = duration(Date.now() - since);
    if (el.textContent !== text) el.textContent = text;
  }, signal);
  return el;
}
