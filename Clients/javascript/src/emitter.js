// Handlers by event name, as Pusher's `bind`/`unbind`. A handler that throws is reported and
// the others still run: an app's bug never leaves the client stuck.

/**
 * A handler of an emitter's events.
 * @typedef {(data: any, meta?: any) => void} Handler
 */

export class Emitter {
  /**
   * @param {(error: unknown, event: string) => void} onHandlerError told when a handler throws.
   */
  constructor(onHandlerError) {
    /** @type {Map<string, Handler[]>} */
    this.handlers = new Map();
    /** @type {((event: string, data: any, meta?: any) => void)[]} */
    this.global = [];
    this.onHandlerError = onHandlerError;
  }

  /**
   * Calls `handler` for every `event`.
   * @param {string} event the event name.
   * @param {Handler} handler receives the event's data (and meta).
   */
  bind(event, handler) {
    const list = this.handlers.get(event) ?? [];
    list.push(handler);
    this.handlers.set(event, list);
  }

  /**
   * Calls `handler(event, data, meta)` for every event.
   * @param {(event: string, data: any, meta?: any) => void} handler the handler.
   */
  bindGlobal(handler) { this.global.push(handler); }

  /**
   * Removes handlers: one of `event` (or every one of `event` without a handler, or every
   * handler of every event without arguments).
   * @param {string} [event] the event name.
   * @param {Function} [handler] the handler to remove.
   */
  unbind(event, handler) {
    if (event === undefined) {
      this.handlers.clear();
      this.global = handler ? this.global.filter((item) => item !== handler) : [];
      return;
    }
    if (!handler) { this.handlers.delete(event); return; }
    const list = (this.handlers.get(event) ?? []).filter((item) => item !== handler);
    if (list.length) this.handlers.set(event, list); else this.handlers.delete(event);
  }

  /**
   * Calls the handlers of `event`, then the global ones, each in a `try`.
   * @param {string} event the event name.
   * @param {unknown} [data] its data.
   * @param {unknown} [meta] its meta.
   */
  emit(event, data, meta) {
    for (const handler of [...(this.handlers.get(event) ?? [])]) {
      try { handler(data, meta); } catch (error) { this.onHandlerError(error, event); }
    }
    for (const handler of [...this.global]) {
      try { handler(event, data, meta); } catch (error) { this.onHandlerError(error, event); }
    }
  }
}
