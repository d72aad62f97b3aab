// The console's one way to reach the platform: REST calls through the gateway with the signed-in party's token,
// and Socket.IO connections to each service's namespace. Errors carry the services' stable codes.
import { Socket } from "./socketio.js";

/** Each service's Socket.IO path behind the gateway, and its namespace (the same table the system tests use). */
const sockets = {
  orders: { path: "/orders/socket.io/", namespace: "/orders" },
  chat: { path: "/chat/socket.io/", namespace: "/chat" },
  rider: { path: "/allocation/socket.io/", namespace: "/rider" },
  tracking: { path: "/location/socket.io/", namespace: "/tracking" },
};

/** An answer other than 2xx: the HTTP status and the service's `{error: {code, message}}`. */
export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

export class Api {
  /** `onRefused(message)` is told when a socket is sent away for good (an expired token, a refused CONNECT). */
  constructor(token, onRefused = () => {}) {
    this.token = token;
    this.onRefused = onRefused;
  }

  /** Calls `method path`; resolves with the decoded body, rejects with ApiError (or a TypeError when offline). */
  async call(method, path, { json, body, headers = {}, idempotencyKey } = {}) {
    const sent = { Authorization: `Bearer ${this.token}`, ...headers };
    if (json !== undefined) sent["Content-Type"] = "application/json";
    if (idempotencyKey) sent["Idempotency-Key"] = idempotencyKey;
    const response = await fetch(path, {
      method,
      headers: sent,
      body: json !== undefined ? JSON.stringify(json) : body,
      cache: "no-store",
    });
    const text = await response.text();
    let decoded = null;
    try {
      decoded = text ? JSON.parse(text) : null;
    } catch {
      decoded = null;
    }
    if (!response.ok) {
      const error = decoded?.error ?? {};
      throw new ApiError(
        response.status,
        error.code ?? `HTTP_${response.status}`,
        error.message ?? `${method} ${path} answered ${response.status}`,
        error.details,
      );
    }
    return decoded;
  }

  get(path) {
    return this.call("GET", path);
  }

  /** A state-changing POST with an Idempotency-Key of its own (a retry of the same action reuses `key`). */
  post(path, json, key = crypto.randomUUID()) {
    return this.call("POST", path, { json, idempotencyKey: key });
  }

  /** A Socket.IO connection to one service's namespace, signed in with this token. */
  socket(kind) {
    const { path, namespace } = sockets[kind];
    const socket = new Socket({ url: location.origin, path, namespace, auth: () => ({ token: this.token }) });
    // Neither is retried (as socket.io-client does not): the party has to sign in again.
    socket.on("token_expired", (expired) => this.onRefused(`${expired.message} Sign in again.`));
    socket.on("connect_error", (refusal) =>
      this.onRefused(`The ${namespace} connection was refused: ${refusal?.message ?? "no reason given"}.`),
    );
    return socket;
  }
}

/** An acknowledgement that carries `{error}` becomes an ApiError-like rejection. */
export async function ack(socket, event, data, timeoutMs) {
  const answer = await socket.emitWithAck(event, data, timeoutMs);
  if (answer?.error) throw new ApiError(0, answer.error.code, answer.error.message, answer.error.details);
  return answer;
}
