// The chat between a customer and their rider (CUS-032): own messages right, the other party's left, each with its
// time; own messages marked sending, sent or "Sending failed". A message that could not be sent (offline, no answer)
// is resent by itself, with the same clientMessageId, once the socket connects again, so it is stored once.
// Read-only with the system message once the order ends. Admins read a chat with `ChatLog`.
import { ack } from "./api.js";
import { clockTime, el } from "./dom.js";

const SEND_TIMEOUT_MS = 5000;
/** Errors a resend cannot mend: the message stays failed with the reason. */
const FINAL_ERRORS = new Set([
  "EMPTY_MESSAGE",
  "MESSAGE_TOO_LONG",
  "INVALID_CHARACTER",
  "VALIDATION_FAILED",
  "FORBIDDEN",
]);

/** One message as a list item: the sender's side, the text, the time and (own messages) the delivery mark. */
function messageItem(message, own) {
  const mark = el("span", { class: "mark", "data-test": "mark" });
  const item = el(
    "li",
    { class: own ? "own" : message.senderRole === "system" ? "system" : "theirs", "data-test": "message" },
    el("span", { class: "visually-hidden" }, own ? "You: " : `${message.senderName ?? "System"}: `),
    el("span", { class: "text" }, message.text),
    el(
      "span",
      { class: "meta" },
      el("time", { datetime: message.sentAt ?? "" }, message.sentAt ? clockTime(message.sentAt) : ""),
      mark,
    ),
  );
  item.mark = mark;
  return item;
}

export class ChatPanel {
  /** `me`: the signed-in party ({id}); `api` loads the quick replies. */
  constructor(chat, api, orderId, me) {
    this.chat = chat;
    this.api = api;
    this.historyPath = `/v1/orders/${encodeURIComponent(orderId)}/chat/messages?limit=100`;
    this.orderId = orderId;
    this.me = me;
    this.shown = new Set();
    this.outbox = [];
    // New messages and changed marks ("Sending failed") are read out.
    this.list = el("ol", {
      class: "messages",
      "aria-label": "Messages",
      "aria-live": "polite",
      "data-test": "messages",
    });
    this.notice = el("p", { class: "muted", role: "status", "data-test": "chat-notice" });
    this.input = el("input", {
      id: `chat-input-${orderId}`,
      maxlength: 500,
      autocomplete: "off",
      "data-test": "chat-input",
    });
    this.sendButton = el("button", { type: "submit", "data-test": "chat-send" }, "Send");
    this.replies = el("div", { class: "quick-replies", role: "group", "aria-label": "Quick replies" });
    this.form = el(
      "form",
      { class: "chat-form", onsubmit: (event) => this.submit(event) },
      el("label", { for: this.input.id, class: "visually-hidden" }, "Message"),
      this.input,
      this.sendButton,
    );
    this.element = el(
      "section",
      { class: "chat", "aria-label": "Chat" },
      el("h3", {}, "Chat"),
      this.notice,
      this.list,
      this.replies,
      this.form,
    );
    this.setWritable(false);
    this.listeners = {
      message: (message) => message.orderId === orderId && this.show(message),
      chat_closed: (closed) => closed.orderId === orderId && this.close(closed.text),
      access_revoked: (revoked) => revoked.orderId === orderId && this.close("This chat was handed to another rider."),
      connect: ({ recovered }) => this.reconnected(recovered),
    };
    for (const [event, listener] of Object.entries(this.listeners)) chat.on(event, listener);
    api.get(`/v1/chat/quick-replies`).then(({ replies }) => {
      for (const reply of replies) {
        this.replies.append(
          el(
            "button",
            {
              type: "button",
              class: "secondary",
              disabled: !this.writable,
              onclick: () => this.send({ quickReplyId: reply.id }, reply.text),
            },
            reply.text,
          ),
        );
      }
    }, () => {});
  }

  /** Joins the room, one join at a time: its last messages, and whether it is read-only. */
  start() {
    this.starting ??= this.join().finally(() => (this.starting = null));
    return this.starting;
  }

  async join() {
    clearTimeout(this.retry);
    if (this.disposed) return;
    try {
      const joined = await ack(this.chat, "join", { orderId: this.orderId });
      this.joined = true;
      this.attempts = 0;
      this.notice.textContent = joined.rider
        ? `Chat with ${this.me.role === "rider" ? "your customer" : joined.rider.name}`
        : "";
      // Joining again after a reconnection that was not recovered: the join has the last 20 messages, so what was
      // said meanwhile beyond those comes from the history (newest first, up to 100).
      const missed = this.shown.size > 0 && joined.messages.some((message) => !this.seen(message));
      const messages = missed ? (await this.api.get(this.historyPath)).messages.reverse() : joined.messages;
      for (const message of messages) this.show(message);
      if (joined.readOnly) this.close("This chat is now closed");
      else this.setWritable(true);
      this.flush();
    } catch (error) {
      // The chat service learns of the rider from orders.events, moments after the order service did: until then
      // the customer hears CHAT_NOT_AVAILABLE and the new rider FORBIDDEN. Ask again (the rider for a while only),
      // and after RATE_LIMITED or no answer, with backoff.
      const assigning =
        error.code === "CHAT_NOT_AVAILABLE" ||
        (error.code === "FORBIDDEN" && (this.forbidden = (this.forbidden ?? 0) + 1) <= 15);
      const busy = error.code === "RATE_LIMITED" || error.code === undefined;
      if (assigning) {
        this.notice.textContent =
          this.me.role === "rider" ? "The chat opens in a moment…" : "The chat opens once a rider is assigned.";
        this.retry = setTimeout(() => this.start(), 1000);
      } else if (busy) {
        this.notice.textContent = "Connecting to the chat…";
        this.attempts = (this.attempts ?? 0) + 1;
        this.retry = setTimeout(() => this.start(), Math.min(1000 * 2 ** this.attempts, 10000));
      } else {
        this.notice.textContent = `Chat unavailable: ${error.message}`;
      }
    }
  }

  /** Whether `message` is on screen already (by its clientMessageId, else its id). */
  seen(message) {
    return this.shown.has(message.clientMessageId ?? message.id);
  }

  setWritable(writable) {
    this.writable = writable;
    for (const control of [this.input, this.sendButton, ...this.replies.children]) control.disabled = !writable;
  }

  show(message) {
    if (this.seen(message)) return;
    this.shown.add(message.clientMessageId ?? message.id);
    this.list.append(messageItem(message, message.senderId === this.me.id));
    this.list.lastElementChild.scrollIntoView({ block: "nearest" });
  }

  submit(event) {
    event.preventDefault();
    const text = this.input.value.trim();
    if (!text) return;
    this.input.value = "";
    this.send({ text }, text);
  }

  /** Shows the message at once as "Sending…", then sends it (now, or after reconnecting). */
  send(content, text) {
    const entry = { payload: { orderId: this.orderId, clientMessageId: crypto.randomUUID(), ...content } };
    entry.item = messageItem({ text, sentAt: new Date().toISOString() }, true);
    this.shown.add(entry.payload.clientMessageId);
    this.list.append(entry.item);
    this.outbox.push(entry);
    this.deliver(entry);
  }

  async deliver(entry) {
    if (!this.chat.connected || !this.joined) return this.mark(entry, "failed");
    this.mark(entry, "sending");
    try {
      const answer = await ack(this.chat, "message", entry.payload, SEND_TIMEOUT_MS);
      this.outbox.splice(this.outbox.indexOf(entry), 1);
      entry.item.querySelector("time").textContent = clockTime(answer.sentAt);
      this.mark(entry, "sent");
    } catch (error) {
      if (FINAL_ERRORS.has(error.code) || error.code === "CHAT_CLOSED") {
        this.outbox.splice(this.outbox.indexOf(entry), 1);
        this.mark(entry, "failed", error.message);
      } else {
        // No answer (or rate-limited) on a live socket: try again shortly; a lost socket retries on reconnecting.
        this.mark(entry, "failed");
        setTimeout(() => this.chat.connected && entry.state === "failed" && this.deliver(entry), 3000);
      }
    }
  }

  mark(entry, state, reason) {
    entry.state = state;
    entry.item.dataset.state = state;
    entry.item.mark.textContent = {
      sending: "Sending…",
      sent: "Sent",
      failed: reason ? `Not sent: ${reason}` : "Sending failed",
    }[state];
  }

  /** After a reconnection: join again unless the session was recovered, then resend what failed, in order. */
  async reconnected(recovered) {
    if (!recovered) {
      this.joined = false;
      await this.start();
    } else {
      this.flush();
    }
  }

  flush() {
    for (const entry of this.outbox.filter((waiting) => waiting.state !== "sending")) this.deliver(entry);
  }

  close(text) {
    clearTimeout(this.retry);
    this.setWritable(false);
    this.form.hidden = true;
    this.replies.hidden = true;
    if (!this.closedShown) {
      this.closedShown = true;
      this.list.append(el("li", { class: "system", "data-test": "chat-closed" }, text));
    }
  }

  dispose() {
    this.disposed = true;
    clearTimeout(this.retry);
    for (const [event, listener] of Object.entries(this.listeners)) this.chat.off(event, listener);
  }
}

/** An admin's read-only view of an order's chat (newest first from the API, shown oldest first). */
export async function chatLog(api, orderId) {
  const page = await api.get(`/v1/orders/${encodeURIComponent(orderId)}/chat/messages?limit=100`);
  const list = el("ol", { class: "messages", "aria-label": "Chat log", "data-test": "chat-log" });
  for (const message of page.messages.reverse()) list.append(messageItem(message, false));
  if (page.messages.length === 0) list.append(el("li", { class: "system" }, "No messages."));
  return list;
}
