// The customer's screen: place an order and follow it live (status, the rider on a map with the ETA, the chat), and
// ask for a technician and watch them come (US-072). Orders and requests placed here are remembered in this browser.
import { ApiError } from "./api.js";
import { ChatPanel } from "./chat.js";
import { byId, el, liveRegion, lookupForm, remembered, rupees, showError, statusWords } from "./dom.js";
import { TrackingPanel } from "./map.js";

const FINAL = new Set(["Delivered", "Cancelled", "Completed"]);

function field(id, label, attributes = {}) {
  return el("div", { class: "field" }, el("label", { for: id }, label), el("input", { id, name: id, ...attributes }));
}

/** A delivery address `northKm` and `eastKm` from `place`. */
function near(place, northKm, eastKm) {
  return {
    lat: +(place.lat + northKm / 111).toFixed(6),
    lng: +(place.lng + eastKm / (111 * Math.cos((place.lat * Math.PI) / 180))).toFixed(6),
  };
}

export async function customerScreen(screen, { api, claims, parties }) {
  const orders = api.socket("orders");
  const tracking = api.socket("tracking");
  const chat = api.socket("chat");
  const cards = new Map();
  const placed = remembered(`orders:${claims.sub}`);
  const requested = remembered(`service-requests:${claims.sub}`);
  const demoVendor = parties.find((party) => party.role === "vendor");

  const error = el("p", { role: "alert", "data-test": "order-error" });
  const orderForm = el(
    "form",
    { id: "order-form", "aria-labelledby": "order-title", onsubmit: (event) => placeOrder(event) },
    el("h3", { id: "order-title" }, "Place an order"),
    field("vendor-id", "Vendor id", { required: true, value: demoVendor?.id ?? "" }),
    field("line1", "Delivery address", { required: true, value: "4 Lake View, Flat 12B" }),
    field("area", "Area", { required: true, value: "" }),
    el(
      "div",
      { class: "row" },
      field("lat", "Latitude", { required: true, inputmode: "decimal" }),
      field("lng", "Longitude", { required: true, inputmode: "decimal" }),
    ),
    field("amount", "Total (₹)", { required: true, inputmode: "decimal", value: "349" }),
    el(
      "div",
      { class: "field" },
      el("label", { for: "payment" }, "Payment"),
      el(
        "select",
        { id: "payment" },
        el("option", { value: "prepaid" }, "Prepaid"),
        el("option", { value: "cash" }, "Cash on delivery"),
      ),
    ),
    el(
      "div",
      { class: "check" },
      el("input", { type: "checkbox", id: "photo-proof", checked: true }),
      el("label", { for: "photo-proof" }, "Photo proof of delivery"),
    ),
    el("button", { type: "submit" }, "Place order"),
    error,
  );
  const requestError = el("p", { role: "alert" });
  const requestForm = el(
    "form",
    { id: "service-form", "aria-labelledby": "service-title", onsubmit: (event) => requestTechnician(event) },
    el("h3", { id: "service-title" }, "Ask for a technician"),
    field("service-description", "What needs doing", { required: true, value: "The kitchen tap leaks" }),
    el("button", { type: "submit", class: "secondary" }, "Request a visit"),
    requestError,
  );
  const list = el("div", { class: "jobs", "data-test": "jobs" });
  const openError = el("p", { role: "alert" });
  const openForm = lookupForm(
    {
      id: "open-order-id",
      label: "Open an order by its id (placed elsewhere, e.g. in the app)",
      button: "Open",
      onSubmit: (id) => openById(id),
      secondary: true,
    },
    openError,
  );
  screen.append(
    el(
      "div",
      { class: "columns" },
      el("div", {}, orderForm, requestForm),
      el("div", {}, el("h3", {}, "Your orders and visits"), openForm, list),
    ),
  );

  async function openById(id) {
    openError.textContent = "";
    try {
      show(await api.get(`/v1/orders/${encodeURIComponent(id)}`), "order");
      placed.add(id);
    } catch (failure) {
      showError(openError, failure);
    }
  }

  async function fillAddress() {
    try {
      const vendor = await api.get(`/v1/vendors/${encodeURIComponent(byId("vendor-id").value.trim())}`);
      const spot = near(vendor.address, 1.6, 1.2);
      byId("area").value ||= vendor.address.area;
      byId("lat").value ||= spot.lat;
      byId("lng").value ||= spot.lng;
    } catch {
      // Unknown vendor: the customer types the address.
    }
  }
  byId("vendor-id").addEventListener("change", fillAddress);
  if (demoVendor) fillAddress();

  function address() {
    return {
      line1: byId("line1").value.trim(),
      area: byId("area").value.trim(),
      lat: Number(byId("lat").value),
      lng: Number(byId("lng").value),
    };
  }

  async function placeOrder(event) {
    event.preventDefault();
    error.textContent = "";
    try {
      const order = await api.call("POST", "/v1/orders", {
        idempotencyKey: crypto.randomUUID(),
        json: {
          vendorId: byId("vendor-id").value.trim(),
          deliveryAddress: address(),
          paymentMode: byId("payment").value,
          totalAmount: Number(byId("amount").value),
          requiresPhotoProof: byId("photo-proof").checked,
        },
      });
      placed.add(order.id);
      show(order, "order");
    } catch (failure) {
      showError(error, failure);
    }
  }

  async function requestTechnician(event) {
    event.preventDefault();
    requestError.textContent = "";
    try {
      const request = await api.call("POST", "/v1/service-requests", {
        json: { serviceAddress: address(), description: byId("service-description").value.trim() },
      });
      requested.add(request.id);
      show(request, "service");
    } catch (failure) {
      showError(requestError, failure);
    }
  }

  /** A card per order or visit: its status, then tracking once there is something to track, and the chat. */
  function show(job, kind) {
    let card = cards.get(job.id);
    // Answers can arrive out of order: an older version of the job never replaces a newer one.
    if (card && job.version < card.version) return;
    if (!card) {
      card = { kind, status: liveRegion(`status-${job.id}`), rider: el("p", { "data-test": "rider" }) };
      card.element = el(
        "article",
        { class: "card", "data-test": kind === "order" ? "order-card" : "service-card", "data-id": job.id },
        el(
          "h4",
          {},
          kind === "order"
            ? `Order ${job.id.slice(0, 8)} · ${job.vendor.name} · ${rupees(job.totalAmount)}`
            : `Visit ${job.id.slice(0, 8)} · ${job.description ?? ""}`,
        ),
        card.status,
        card.rider,
      );
      if (kind === "order") {
        card.cancel = el(
          "button",
          { type: "button", class: "secondary", onclick: () => cancel(job.id, card) },
          "Cancel order",
        );
        card.element.append(card.cancel);
      }
      list.prepend(card.element);
      cards.set(job.id, card);
    }
    card.version = job.version;
    card.status.textContent = statusWords[job.status] ?? job.status;
    card.status.dataset.status = job.status;
    const person = kind === "order" ? job.rider : job.technician;
    card.rider.textContent = person ? `${kind === "order" ? "Rider" : "Technician"}: ${person.name}` : "";
    if (card.cancel)
      card.cancel.hidden = !["PendingVendorAcceptance", "Preparing", "ReadyForPickup"].includes(job.status);
    const trackable =
      kind === "order"
        ? job.status === "InTransit"
        : ["OnTheWay", "WorkInProgress"].includes(job.status);
    if (trackable && !card.tracking) {
      card.tracking = new TrackingPanel(tracking, job.id, { courierWord: kind === "order" ? "rider" : "technician" });
      if (card.chat) card.chat.element.before(card.tracking.element);
      else card.element.append(card.tracking.element);
      card.tracking.start();
    }
    if (kind === "order" && job.rider && !card.chat && !FINAL.has(job.status)) {
      card.chat = new ChatPanel(chat, api, job.id, { id: claims.sub, role: "customer" });
      card.element.append(card.chat.element);
      card.chat.start();
    }
    if (FINAL.has(job.status) && card.tracking && job.status !== "Delivered")
      // Final: no view or status read before the end replaces it.
      card.tracking.status({ state: "ended", message: card.status.textContent, version: Infinity });
  }

  async function cancel(id, card) {
    try {
      show(await api.post(`/v1/orders/${id}/cancel`, { reason: "Changed my mind" }), "order");
    } catch (failure) {
      card.status.textContent = failure.message;
    }
  }

  async function refresh(id, kind) {
    try {
      show(await api.get(kind === "order" ? `/v1/orders/${id}` : `/v1/service-requests/${id}`), kind);
    } catch (failure) {
      if (!(failure instanceof ApiError && failure.status === 404)) console.warn(`could not load ${id}`, failure);
    }
  }

  function refreshAll() {
    for (const id of placed.all()) refresh(id, "order");
    for (const id of requested.all()) refresh(id, "service");
  }

  orders.on("order_update", (update) => {
    const card = cards.get(update.orderId);
    if (card) refresh(update.orderId, card.kind);
  });
  // A reconnection that was not recovered missed updates: load every card again.
  orders.on("connect", ({ recovered }) => recovered || refreshAll());
  return () => [orders, tracking, chat].forEach((socket) => socket.disconnect());
}
