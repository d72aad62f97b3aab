// The rider's screen (RDR-010, RDR-016, RDR-020): go Online with the device's location (blocked behind RDR-020's
// screen when it is denied), the offer with its countdown, the task (arrived, pickup, proof photo, delivered) and
// the chat with the customer.
import { ack } from "./api.js";
import { ChatPanel } from "./chat.js";
import { currentFix, openCamera, PermissionDenied, permissionScreen, PositionSender } from "./device.js";
import { el, liveRegion, modal, openDialog, rupees, showError } from "./dom.js";

/** A pickup confirmed while offline waits here (with its Idempotency-Key) until the network is back. */
const PENDING_PICKUP_KEY = "pending-pickup";
/** How often a pending pickup is tried again when the network seems up but the request failed. */
const PICKUP_RETRY_MS = 5000;

export async function riderScreen(screen, { api, claims }) {
  const riderSocket = api.socket("rider");
  const tracking = api.socket("tracking");
  const chat = api.socket("chat");
  const positions = new PositionSender(tracking, () => denied("geolocation"));
  const PENDING_PICKUP = `${PENDING_PICKUP_KEY}:${claims.sub}`;
  let me = { status: "offline" };
  let offer = null;
  let task = null;

  const status = liveRegion("rider-status");
  const toggle = el(
    "button",
    {
      type: "button",
      role: "switch",
      "aria-checked": "false",
      id: "online-toggle",
      "data-test": "online-toggle",
      onclick: () => (me.status === "offline" ? goOnline() : goOffline()),
    },
    "Go Online",
  );
  const error = el("p", { role: "alert", "data-test": "rider-error" });
  // Always in the page (empty, it is not shown): a live region that appears with its text is often not read out.
  const notice = el("p", { class: "notice", role: "status", "data-test": "rider-notice" });
  const taskBox = el("section", { class: "card", "aria-label": "Current delivery", "data-test": "task", hidden: true });
  screen.append(el("div", { class: "toolbar" }, toggle, status), error, notice, taskBox);

  function showMe(rider) {
    me = rider;
    const words = {
      offline: "Offline",
      online: "Online, waiting for offers",
      offered: "Online, an offer is waiting",
      delivering: "On a delivery",
    };
    status.textContent = words[rider.status] ?? rider.status;
    status.dataset.status = rider.status;
    const on = rider.status !== "offline";
    toggle.setAttribute("aria-checked", String(on));
    toggle.textContent = on ? "Go Offline" : "Go Online";
    if (rider.offlineMessage) error.textContent = rider.offlineMessage;
    if (on) positions.start();
    else if (!task) positions.stop();
  }

  async function denied(permission) {
    toggle.disabled = true;
    await permissionScreen(permission);
    toggle.disabled = false;
  }

  async function goOnline() {
    error.textContent = "";
    toggle.disabled = true;
    try {
      const fix = await currentFix();
      showMe(await api.call("PUT", "/v1/riders/me/availability", { json: { status: "online", location: fix } }));
    } catch (failure) {
      if (failure instanceof PermissionDenied) {
        await denied("geolocation");
        return goOnline();
      }
      showError(error, failure);
    } finally {
      toggle.disabled = false;
    }
  }

  async function goOffline() {
    error.textContent = "";
    try {
      showMe(await api.call("PUT", "/v1/riders/me/availability", { json: { status: "offline" } }));
    } catch (failure) {
      showError(error, failure);
    }
  }

  function tell(text) {
    notice.textContent = text;
  }

  // The offer: a modal with the vendor, the area, the distances, the earnings and a countdown to its deadline.
  function showOffer(received) {
    if (offer?.id === received.offerId) return;
    offer?.close();
    const deadline = new Date(received.expiresAt).getTime();
    const countdown = el("p", { class: "countdown", "data-test": "countdown", "aria-live": "off" });
    const bar = el("progress", { max: received.timeoutSeconds, value: received.timeoutSeconds, "aria-hidden": "true" });
    const outcome = el("p", { role: "alert", "data-test": "offer-outcome" });
    const accept = el(
      "button",
      { type: "button", "data-test": "accept-offer", onclick: () => answer("accept") },
      "Accept",
    );
    const reject = el(
      "button",
      { type: "button", class: "secondary", "data-test": "reject-offer", onclick: () => answer("reject") },
      "Reject",
    );
    const dismiss = el(
      "button",
      { type: "button", hidden: true, "data-test": "dismiss-offer", onclick: () => close() },
      "Dismiss",
    );
    const dialog = modal(
      {
        role: "dialog",
        "aria-labelledby": "offer-title",
        "data-test": "offer",
        "data-offer-id": received.offerId,
      },
      el("h2", { id: "offer-title" }, `New delivery offer: earn ${rupees(received.earnings.amount)}`),
      el(
        "dl",
        { class: "facts" },
        el("dt", {}, "Pick up at"),
        el("dd", { "data-test": "offer-vendor" }, `${received.vendor.name}, ${received.vendor.address}`),
        el("dt", {}, "Deliver to"),
        el("dd", { "data-test": "offer-area" }, received.deliveryArea),
        el("dt", {}, "To the store"),
        el("dd", {}, `${received.distanceKm.toFixed(1)} km`),
        el("dt", {}, "Whole trip"),
        el("dd", {}, `${received.tripDistanceKm.toFixed(1)} km`),
        el("dt", {}, "Earnings"),
        el("dd", { "data-test": "offer-earnings" }, rupees(received.earnings.amount)),
      ),
      countdown,
      bar,
      el("div", { class: "actions" }, accept, reject, dismiss),
      outcome,
    );
    function tick() {
      const left = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
      countdown.textContent = `${left} s left to answer`;
      bar.value = left;
      if (left === 0) gone("This offer is no longer available");
    }
    const timer = setInterval(tick, 250);
    tick();
    function gone(text) {
      clearInterval(timer);
      outcome.textContent = text;
      countdown.hidden = bar.hidden = accept.hidden = reject.hidden = true;
      dismiss.hidden = false;
      dismiss.focus();
    }
    function close() {
      clearInterval(timer);
      closeDialog();
      if (offer?.id === received.offerId) offer = null;
    }
    async function answer(verb) {
      accept.disabled = reject.disabled = true;
      try {
        await api.post(`/v1/offers/${received.offerId}/${verb}`);
        close();
        if (verb === "accept") await loadTask(received.orderId);
        refreshMe();
      } catch (failure) {
        if (["OFFER_EXPIRED", "OFFER_RESCINDED", "OFFER_NOT_PENDING"].includes(failure.code))
          gone("This offer is no longer available");
        else {
          outcome.textContent = failure.message;
          accept.disabled = reject.disabled = false;
        }
      }
    }
    offer = { id: received.offerId, close, gone };
    const closeDialog = openDialog(dialog);
    // The app confirms it has the offer on screen.
    ack(riderSocket, "received", { offerId: received.offerId }).catch(() =>
      api.post(`/v1/offers/${received.offerId}/received`).catch(() => {}),
    );
  }

  // The task: the order the rider is delivering.
  async function loadTask(orderId) {
    // The order service learns of the assignment from allocation's event, moments after the accept answered.
    let order;
    for (let attempt = 0; !order; attempt++) {
      try {
        order = await api.get(`/v1/orders/${orderId}`);
      } catch (failure) {
        if (attempt >= 20 || ![403, 404].includes(failure.status)) throw failure;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
    if (!task || task.id !== orderId) {
      clearTask();
      task = { id: orderId, chat: new ChatPanel(chat, api, orderId, { id: claims.sub, role: "rider" }) };
      task.chat.start();
    }
    task.order = order;
    renderTask();
    positions.start();
  }

  function renderTask() {
    const order = task.order;
    const pending = JSON.parse(localStorage.getItem(PENDING_PICKUP) ?? "null");
    const taskError = el("p", { role: "alert", "data-test": "task-error" });
    const run = (action) => async () => {
      taskError.textContent = "";
      try {
        task.order = await action();
        renderTask();
      } catch (failure) {
        showError(taskError, failure);
      }
    };
    const actions = el("div", { class: "actions" });
    if (order.status === "ReadyForPickup" || order.status === "Preparing") {
      if (!order.riderArrivedAt)
        actions.append(
          el(
            "button",
            { type: "button", "data-test": "arrived", onclick: run(() => api.post(`/v1/orders/${order.id}/arrived`)) },
            "I've arrived at the store",
          ),
        );
      else if (pending?.orderId === order.id)
        actions.append(
          el(
            "p",
            { class: "pending", role: "status", "data-test": "pickup-pending" },
            "Pickup confirmation pending: it will be sent when you are back online.",
          ),
        );
      else
        actions.append(
          el(
            "button",
            { type: "button", "data-test": "confirm-pickup", onclick: () => confirmPickup(taskError) },
            "Confirm pickup",
          ),
        );
    }
    if (order.status === "InTransit") {
      if (order.requiresPhotoProof && !order.proofPhoto) {
        const file = el("input", {
          type: "file",
          id: "proof-file",
          accept: "image/jpeg,image/png",
          capture: "environment",
          "data-test": "proof-file",
          onchange: () => file.files[0] && upload(file.files[0], taskError),
        });
        actions.append(
          el(
            "button",
            { type: "button", "data-test": "take-photo", onclick: () => takePhoto(taskError) },
            "Take proof photo",
          ),
          el("label", { for: "proof-file", class: "file-label" }, "or choose a photo", file),
        );
      } else {
        actions.append(
          el(
            "button",
            { type: "button", "data-test": "deliver", onclick: run(() => api.post(`/v1/orders/${order.id}/deliver`)) },
            "Mark delivered",
          ),
        );
      }
    }
    const words = {
      Preparing: "Being prepared at the store",
      ReadyForPickup: "Ready at the store",
      InTransit: "Picked up: on the way to the customer",
      Delivered: "Delivered",
      Cancelled: "Cancelled",
    };
    taskBox.replaceChildren(
      el("h3", {}, `Delivery ${order.id.slice(0, 8)}`),
      el("p", { "data-test": "task-status", "data-status": order.status }, words[order.status] ?? order.status),
      el("p", {}, `Pick up: ${order.vendor.name}, ${order.vendor.address.line1}`),
      el("p", {}, `Deliver to: ${order.deliveryAddress.line1}, ${order.deliveryAddress.area}`),
      order.proofPhoto ? el("p", { "data-test": "proof-uploaded" }, "Proof photo uploaded.") : "",
      actions,
      taskError,
      task.chat.element,
    );
    taskBox.hidden = false;
    if (order.status === "Delivered" || order.status === "Cancelled") {
      task.chat.close("This chat is now closed");
      task.chat.dispose();
      task = null;
      positions.stop();
      refreshMe();
    }
  }

  /** Drops the task on screen (re-assigned away, or no longer the rider's). */
  function clearTask() {
    task?.chat.dispose();
    task = null;
    taskBox.hidden = true;
    taskBox.replaceChildren();
  }

  /** RDR-016: the pickup with an Idempotency-Key; offline it waits (with the same key) and is sent once back. */
  async function confirmPickup(taskError) {
    const pending = { orderId: task.id, key: crypto.randomUUID() };
    localStorage.setItem(PENDING_PICKUP, JSON.stringify(pending));
    await sendPickup(taskError);
  }

  async function sendPickup(taskError) {
    const pending = JSON.parse(localStorage.getItem(PENDING_PICKUP) ?? "null");
    if (!pending) return;
    if (!navigator.onLine) return task && renderTask();
    try {
      const order = await api.post(`/v1/orders/${pending.orderId}/pickup`, undefined, pending.key);
      localStorage.removeItem(PENDING_PICKUP);
      if (task?.id === order.id) {
        task.order = order;
        renderTask();
      }
    } catch (failure) {
      if (failure instanceof TypeError) {
        // No answer although the browser thinks it is online: keep it pending and try again shortly.
        setTimeout(() => sendPickup(), PICKUP_RETRY_MS);
        return task && renderTask();
      }
      localStorage.removeItem(PENDING_PICKUP);
      if (task) {
        renderTask();
        showError(taskError ?? error, failure);
      }
    }
  }
  window.addEventListener("online", () => sendPickup());

  async function upload(blob, taskError) {
    try {
      const uploaded = await api.call("POST", `/v1/orders/${task.id}/proof-photo`, {
        body: blob,
        headers: { "Content-Type": blob.type || "image/jpeg" },
      });
      task.order = { ...task.order, proofPhoto: uploaded.proofPhoto };
      renderTask();
    } catch (failure) {
      showError(taskError, failure);
    }
  }

  async function takePhoto(taskError) {
    let stream;
    try {
      stream = await openCamera();
    } catch (failure) {
      if (failure instanceof PermissionDenied) {
        await permissionScreen("camera");
        return takePhoto(taskError);
      }
      return showError(taskError, failure);
    }
    const video = el("video", { autoplay: true, playsinline: true, "aria-label": "Camera preview" });
    video.srcObject = stream;
    const capture = () => {
      const canvas = el("canvas");
      canvas.width = video.videoWidth || 640;
      canvas.height = video.videoHeight || 480;
      canvas.getContext("2d").drawImage(video, 0, 0, canvas.width, canvas.height);
      canvas.toBlob(
        (blob) => {
          stop();
          upload(blob, taskError);
        },
        "image/jpeg",
        0.85,
      );
    };
    const dialog = modal(
      { role: "dialog", "aria-label": "Proof photo" },
      video,
      el(
        "div",
        { class: "actions" },
        el("button", { type: "button", onclick: capture }, "Capture"),
        el("button", { type: "button", class: "secondary", onclick: () => stop() }, "Cancel"),
      ),
    );
    const closeDialog = openDialog(dialog);
    function stop() {
      stream.getTracks().forEach((track) => track.stop());
      closeDialog();
    }
  }

  async function refreshMe() {
    try {
      showMe(await api.get("/v1/riders/me"));
    } catch (failure) {
      showError(error, failure);
    }
  }

  riderSocket.on("offer", showOffer);
  riderSocket.on("offer_expired", (expired) =>
    offer?.id === expired.offerId && offer.gone("This offer is no longer available"),
  );
  riderSocket.on("offer_rescinded", (rescinded) => offer?.id === rescinded.offerId && offer.gone(rescinded.message));
  riderSocket.on("went_offline", ({ message }) => {
    error.textContent = message;
    refreshMe();
  });
  riderSocket.on("order_cancelled", ({ orderId, message }) => {
    tell(message);
    if (task?.id === orderId) {
      task.order = { ...task.order, status: "Cancelled" };
      renderTask();
    }
  });
  riderSocket.on("order_unassigned", ({ orderId, message }) => {
    tell(message);
    if (task?.id === orderId) clearTask();
    refreshMe();
  });
  riderSocket.on("order_assigned", ({ orderId, message }) => {
    tell(message);
    loadTask(orderId);
  });

  // A reconnection that was not recovered missed what `/rider` said meanwhile (it went out as pushes): load the
  // rider and the task again. (The server sends a pending offer again on every connect.)
  let connectedBefore = false;
  riderSocket.on("connect", async ({ recovered }) => {
    const first = !connectedBefore;
    connectedBefore = true;
    if (first || recovered) return;
    await refreshMe();
    if (me.currentOrderId) await loadTask(me.currentOrderId).catch((failure) => showError(error, failure));
    else clearTask();
  });

  await refreshMe();
  if (me.currentOrderId) await loadTask(me.currentOrderId).catch(() => {});
  sendPickup();
  return () => {
    positions.stop();
    offer?.close();
    [riderSocket, tracking, chat].forEach((socket) => socket.disconnect());
  };
}
