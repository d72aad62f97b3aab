// The technician's screen: the visits assigned to them (live from `/orders`, remembered in this browser), each with
// On the way, travel mode on/off (which shares the device's location with the customer), work in progress and
// completed.
import { ApiError } from "./api.js";
import { currentFix, PermissionDenied, permissionScreen, PositionSender } from "./device.js";
import { el, liveRegion, lookupForm, remembered, showError, statusWords } from "./dom.js";

export async function technicianScreen(screen, { api, claims }) {
  const orders = api.socket("orders");
  const tracking = api.socket("tracking");
  const positions = new PositionSender(tracking, () => permissionScreen("geolocation"));
  const kept = remembered(`visits:${claims.sub}`);
  const cards = new Map();
  const travelling = new Set();

  const openError = el("p", { role: "alert" });
  const list = el("div", { class: "jobs", "data-test": "visits" });
  screen.append(
    lookupForm(
      {
        id: "visit-id",
        label: "Open a visit by its id",
        button: "Open",
        onSubmit: (id) => load(id, openError),
        secondary: true,
      },
      openError,
    ),
    el("h3", {}, "Your visits"),
    el("p", { class: "muted" }, "Visits assigned to you appear here as they are assigned."),
    list,
  );

  async function load(id, errorRegion) {
    try {
      show(await api.get(`/v1/service-requests/${encodeURIComponent(id)}`));
    } catch (failure) {
      if (errorRegion) showError(errorRegion, failure);
    }
  }

  function show(visit) {
    kept.add(visit.id);
    let card = cards.get(visit.id);
    if (!card) {
      card = {
        status: liveRegion(`visit-status-${visit.id}`),
        actions: el("div", { class: "actions" }),
        error: el("p", { role: "alert" }),
      };
      card.element = el("article", { class: "card", "data-test": "visit-card", "data-id": visit.id },
        el("h4", {}, `Visit ${visit.id.slice(0, 8)}: ${visit.description}`),
        el("p", {}, `${visit.serviceAddress.line1}, ${visit.serviceAddress.area}`),
        card.status, card.actions, card.error);
      list.prepend(card.element);
      cards.set(visit.id, card);
    }
    card.status.textContent = statusWords[visit.status] ?? visit.status;
    card.status.dataset.status = visit.status;
    const step = (status, label) =>
      el(
        "button",
        { type: "button", "data-test": `status-${status}`, onclick: () => change(visit, card, status) },
        label,
      );
    const actions = [];
    if (visit.status === "TechnicianAssigned") actions.push(step("OnTheWay", "On the way"));
    if (visit.status === "OnTheWay") {
      const on = travelling.has(visit.id);
      actions.push(
        el(
          "button",
          {
            type: "button",
            role: "switch",
            "aria-checked": String(on),
            "data-test": "travel-mode",
            onclick: () => travelMode(visit, card, !on),
          },
          on ? "Travel mode: on" : "Travel mode: off",
        ),
        step("WorkInProgress", "Arrived: start work"),
      );
    }
    if (visit.status === "WorkInProgress") actions.push(step("Completed", "Completed"));
    card.actions.replaceChildren(...actions);
    if (visit.status !== "OnTheWay" && travelling.delete(visit.id) && travelling.size === 0) positions.stop();
  }

  async function change(visit, card, status) {
    card.error.textContent = "";
    try {
      show(await api.post(`/v1/service-requests/${visit.id}/status`, { status }));
    } catch (failure) {
      showError(card.error, failure);
    }
  }

  async function travelMode(visit, card, active) {
    card.error.textContent = "";
    try {
      if (active) {
        const fix = await currentFix();
        await api.post(`/v1/tracking/${visit.id}/travel-mode`, { active });
        travelling.add(visit.id);
        positions.start();
        positions.send(fix);
      } else {
        await api.post(`/v1/tracking/${visit.id}/travel-mode`, { active });
        travelling.delete(visit.id);
        if (travelling.size === 0) positions.stop();
      }
      show(visit);
    } catch (failure) {
      if (failure instanceof PermissionDenied) {
        await permissionScreen("geolocation");
        return travelMode(visit, card, active);
      }
      showError(
        card.error,
        failure instanceof ApiError && failure.status === 404
          ? new Error("The location service does not know this visit yet; try again in a moment.")
          : failure,
      );
    }
  }

  orders.on("order_update", (update) => {
    if (update.type.startsWith("ServiceRequest")) load(update.orderId);
  });
  orders.on("connect", ({ recovered }) => recovered || kept.all().forEach((id) => load(id)));
  return () => {
    positions.stop();
    [orders, tracking].forEach((socket) => socket.disconnect());
  };
}
