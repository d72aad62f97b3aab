// A small Socket.IO v5 client (Engine.IO v4 over WebSocket) for the console. It keeps to what the apps' official
// socket.io-client 4.x does where the stories depend on it:
// - after its transport closes it reconnects (0.5-1.5 s, doubling up to 5 s), but never after the server's DISCONNECT;
// - it recovers its session through connection state recovery: the CONNECT carries the pid and the last offset, and
//   the server answers with the same pid when the session was restored (`recovered`);
// - emits made while disconnected wait in a buffer and go out once connected.
// The browser's `offline` event counts as a lost transport (a phone app does the same on its network callback).

const RECONNECT_MIN_MS = 1000;
const RECONNECT_MAX_MS = 5000;
const RANDOMIZATION = 0.5;
/** As socket.io-client's `timeout`: a connection not open (CONNECT answered) by then is dropped and retried. */
const CONNECT_TIMEOUT_MS = 20000;

/** Splits a Socket.IO packet (without the Engine.IO `4`) into its type, namespace, ack id and data. */
export function parsePacket(text) {
  let index = 0;
  const type = Number(text[index++]);
  if (type === 5 || type === 6) {
    throw new Error("binary packets are not supported by the console client");
  }
  let namespace = "/";
  if (text[index] === "/") {
    const comma = text.indexOf(",", index);
    namespace = comma < 0 ? text.slice(index) : text.slice(index, comma);
    index = comma < 0 ? text.length : comma + 1;
  }
  let digits = "";
  while (index < text.length && text[index] >= "0" && text[index] <= "9") digits += text[index++];
  const ackId = digits === "" ? null : Number(digits);
  const data = index < text.length ? JSON.parse(text.slice(index)) : undefined;
  return { type, namespace, ackId, data };
}

/** Encodes a Socket.IO packet for the Engine.IO message it travels in. */
export function encodePacket({ type, namespace, ackId = null, data }) {
  const prefix = namespace === "/" ? "" : `${namespace},`;
  return `4${type}${prefix}${ackId === null ? "" : ackId}${data === undefined ? "" : JSON.stringify(data)}`;
}

export class Socket {
  /**
   * @param {object} options
   * @param {string} options.url      the gateway's origin, e.g. https://127.0.0.1:8443
   * @param {string} options.path     the Engine.IO path, e.g. /chat/socket.io/
   * @param {string} options.namespace e.g. /chat
   * @param {() => object} options.auth the CONNECT payload, read at every (re)connection (a fresh token)
   */
  constructor({ url, path, namespace, auth }) {
    this.url = url;
    this.path = path;
    this.namespace = namespace;
    this.auth = auth;
    this.connected = false;
    this.recovered = false;
    this.id = null;
    this.pid = null;
    this.offset = null;
    this.listeners = new Map();
    this.acks = new Map();
    this.nextAck = 0;
    this.sendBuffer = [];
    this.attempts = 0;
    this.closedForGood = false;
    this.ws = null;
    this.pingTimer = null;
    this.reconnectTimer = null;
    this.affinity = crypto.randomUUID();
    this.onOffline = () => this.transportLost("transport close");
    this.onOnline = () => {
      if (!this.ws && !this.closedForGood) this.open();
    };
    window.addEventListener("offline", this.onOffline);
    window.addEventListener("online", this.onOnline);
    this.open();
  }

  on(event, listener) {
    if (!this.listeners.has(event)) this.listeners.set(event, new Set());
    this.listeners.get(event).add(listener);
    return this;
  }

  off(event, listener) {
    this.listeners.get(event)?.delete(listener);
    return this;
  }

  fire(event, ...args) {
    for (const listener of this.listeners.get(event) ?? []) {
      try {
        listener(...args);
      } catch (error) {
        console.error(`listener of ${event} failed`, error);
      }
    }
  }

  /** Emits an event; sent at once when connected, else when the socket next connects. */
  emit(event, ...args) {
    this.send({ type: 2, namespace: this.namespace, data: [event, ...args] });
  }

  /** Emits with an acknowledgement: resolves with the answer's first argument, rejects after `timeoutMs`. */
  emitWithAck(event, data, timeoutMs = 10000) {
    return new Promise((resolve, reject) => {
      const ackId = this.nextAck++;
      const timer = setTimeout(() => {
        this.acks.delete(ackId);
        reject(new Error(`no answer to ${event} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.acks.set(ackId, (args) => {
        clearTimeout(timer);
        resolve(args[0]);
      });
      this.send({ type: 2, namespace: this.namespace, ackId, data: [event, data] });
    });
  }

  /** Leaves for good (DISCONNECT): no reconnection. */
  disconnect() {
    if (this.ws && this.connected) this.ws.send(encodePacket({ type: 1, namespace: this.namespace }));
    this.endForGood("io client disconnect");
  }

  /** No reconnection after this: the client left, or the server sent it away (DISCONNECT, CONNECT_ERROR). */
  endForGood(reason) {
    this.closedForGood = true;
    window.removeEventListener("offline", this.onOffline);
    window.removeEventListener("online", this.onOnline);
    clearTimeout(this.reconnectTimer);
    clearTimeout(this.connectTimer);
    this.ws?.close();
    this.ws = null;
    this.setDisconnected(reason);
  }

  send(packet) {
    const text = encodePacket(packet);
    if (this.connected && this.ws?.readyState === WebSocket.OPEN) this.ws.send(text);
    else this.sendBuffer.push(text);
  }

  open() {
    // One connection at a time: coming back online while a reconnection is scheduled opens it once.
    if (this.closedForGood || this.ws || !navigator.onLine) return;
    clearTimeout(this.reconnectTimer);
    const origin = this.url.replace(/^http/, "ws");
    const ws = new WebSocket(`${origin}${this.path}?EIO=4&transport=websocket&affinity=${this.affinity}`);
    this.ws = ws;
    clearTimeout(this.connectTimer);
    this.connectTimer = setTimeout(
      () => this.ws === ws && !this.connected && this.transportLost("timeout"),
      CONNECT_TIMEOUT_MS,
    );
    ws.onmessage = (message) => this.receive(ws, message.data);
    ws.onclose = () => {
      if (this.ws === ws) this.transportLost("transport close");
    };
    ws.onerror = () => {};
  }

  receive(ws, text) {
    if (ws !== this.ws || typeof text !== "string") return;
    switch (text[0]) {
      case "0": {
        const open = JSON.parse(text.slice(1));
        this.heartbeat = open.pingInterval + open.pingTimeout;
        this.armPingTimer();
        const auth = { ...this.auth() };
        if (this.pid) Object.assign(auth, { pid: this.pid }, this.offset === null ? {} : { offset: this.offset });
        this.previousPid = this.pid;
        ws.send(encodePacket({ type: 0, namespace: this.namespace, data: auth }));
        break;
      }
      case "2":
        this.armPingTimer();
        ws.send("3");
        break;
      case "1":
        this.transportLost("transport close");
        break;
      case "4":
        this.receivePacket(parsePacket(text.slice(1)));
        break;
    }
  }

  receivePacket({ type, namespace, ackId, data }) {
    if (namespace !== this.namespace) return;
    switch (type) {
      case 0:
        this.id = data.sid;
        this.pid = data.pid ?? null;
        this.recovered = this.previousPid != null && this.pid === this.previousPid;
        if (!this.recovered) this.offset = null;
        clearTimeout(this.connectTimer);
        this.connected = true;
        this.attempts = 0;
        for (const text of this.sendBuffer.splice(0)) this.ws.send(text);
        this.fire("connect", { recovered: this.recovered });
        break;
      case 1:
        this.endForGood("io server disconnect");
        break;
      case 2: {
        const args = data.slice(1);
        if (this.pid && args.length > 0 && typeof args[args.length - 1] === "string") this.offset = args.pop();
        if (ackId !== null) {
          this.fire(data[0], ...args, (...answer) =>
            this.send({ type: 3, namespace: this.namespace, ackId, data: answer }),
          );
        } else {
          this.fire(data[0], ...args);
        }
        break;
      }
      case 3:
        this.acks.get(ackId)?.(data);
        this.acks.delete(ackId);
        break;
      case 4:
        this.endForGood("connect error");
        this.fire("connect_error", data);
        break;
    }
  }

  armPingTimer() {
    clearTimeout(this.pingTimer);
    this.pingTimer = setTimeout(() => this.transportLost("ping timeout"), this.heartbeat);
  }

  setDisconnected(reason) {
    clearTimeout(this.pingTimer);
    const was = this.connected;
    this.connected = false;
    if (was) this.fire("disconnect", reason);
  }

  /** The transport is gone (closed, no ping, offline): reconnect with backoff, as socket.io-client does. */
  transportLost(reason) {
    const ws = this.ws;
    this.ws = null;
    if (ws) {
      ws.onclose = null;
      ws.close();
    }
    clearTimeout(this.connectTimer);
    this.setDisconnected(reason);
    if (this.closedForGood) return;
    clearTimeout(this.reconnectTimer);
    const base = Math.min(RECONNECT_MIN_MS * 2 ** this.attempts, RECONNECT_MAX_MS);
    const delay = base * (1 - RANDOMIZATION + Math.random() * 2 * RANDOMIZATION);
    this.attempts += 1;
    this.reconnectTimer = setTimeout(() => this.open(), Math.min(delay, RECONNECT_MAX_MS));
  }
}
