// The operator's screen: a live feed of order changes, an order's event log, saga steps and chat log (read-only),
// a user's notification log, and a live map of the riders on duty and the orders they hold.
import { chatLog } from "./chat.js";
import { clockTime, el, lookupForm, showError, statusWords } from "./dom.js";
import { createMap, dot } from "./map.js";

const MAP_REFRESH_MS = 3000;
const RIDER_COLORS = { online: "#146c2e", offered: "#8a5300", delivering: "#0b57d0" };

function table(caption, headings, rows) {
  return el("table", {}, el("caption", {}, caption),
    el("thead", {}, el("tr", {}, headings.map((heading) => el("th", { scope: "col" }, heading)))),
    el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((cell) => el("td", {}, cell))))));
}

export async function adminScreen(screen, { api }) {
  const orders = api.socket("orders");
  const orderForm = lookupForm({ id: "admin-order-id", label: "Order id", button: "Open order", onSubmit: openOrder });
  const userForm = lookupForm({
    id: "admin-user-id",
    label: "User id",
    button: "Notification log",
    onSubmit: openNotifications,
  });
  const orderView = el("div", { "data-test": "order-view" });
  const notificationView = el("div", { "data-test": "notification-view" });
  const feed = el("ol", { class: "feed", "aria-label": "Order changes, newest first", "data-test": "feed" });
  const mapBox = el("div", { class: "map", "data-test": "riders-map" });
  const mapStatus = el("p", { class: "muted", role: "status", "data-test": "riders-map-status" });

  screen.append(
    el(
      "div",
      { class: "columns" },
      el(
        "section",
        { "aria-labelledby": "map-title" },
        el("h3", { id: "map-title" }, "Riders on duty"),
        mapBox,
        mapStatus,
      ),
      el("section", { "aria-labelledby": "feed-title" }, el("h3", { id: "feed-title" }, "Live order changes"), feed),
    ),
    orderForm,
    orderView,
    userForm,
    notificationView,
  );

  async function openOrder(id) {
    orderView.replaceChildren(el("p", {}, "Loading…"));
    const error = el("p", { role: "alert" });
    try {
      const path = `/v1/orders/${encodeURIComponent(id)}`;
      const [order, log, saga] = await Promise.all([
        api.get(path),
        api.get(`${path}/events`),
        api.get(`${path}/saga`).catch((failure) => (failure.status === 404 ? null : Promise.reject(failure))),
      ]);
      const steps = saga ? Object.entries(saga.steps ?? {}) : [];
      orderView.replaceChildren(
        el("h3", {}, `Order ${order.id}`),
        el(
          "p",
          { "data-test": "admin-order-status" },
          `${statusWords[order.status] ?? order.status} · ${order.vendor.name} · rider ${
            order.rider?.name ?? "none"
          }`,
        ),
        table(
          "Event log (oldest first)",
          ["#", "event", "by", "at"],
          log.events.map((event) => [
            String(event.sequence),
            event.type,
            event.actorId ? `${event.actorRole} ${event.actorId}` : "system",
            clockTime(event.occurredAt),
          ]),
        ),
        saga
          ? table(
              `Pickup saga: ${saga.status}${saga.failure ? ` (${saga.failure})` : ""}`,
              ["step", "done", "at"],
              steps.map(([name, step]) => [
                name,
                step.done ? "yes" : "not yet",
                step.at ? clockTime(step.at) : step.failure ?? "",
              ]),
            )
          : el("p", {}, "No pickup saga yet (it starts at pickup)."),
        el("h4", {}, "Chat (read-only)"),
        await chatLog(api, order.id).catch((failure) => el("p", {}, `No chat: ${failure.message}`)),
      );
    } catch (failure) {
      showError(error, failure);
      orderView.replaceChildren(error);
    }
  }

  async function openNotifications(userId) {
    const error = el("p", { role: "alert" });
    try {
      const log = await api.get(`/v1/notifications?userId=${encodeURIComponent(userId)}&limit=50`);
      notificationView.replaceChildren(
        table(
          `Notifications of ${userId} (newest first)`,
          ["kind", "title", "body", "status", "devices", "at"],
          log.notifications.map((push) => [
            push.kind,
            push.title,
            push.body,
            push.status,
            push.deliveries.map((delivery) => `${delivery.platform} ${delivery.status}`).join(", ") || "none",
            clockTime(push.createdAt),
          ]),
        ),
      );
    } catch (failure) {
      showError(error, failure);
      notificationView.replaceChildren(error);
    }
  }

  orders.on("order_update", (update) => {
    feed.prepend(
      el(
        "li",
        {},
        el(
          "button",
          {
            type: "button",
            class: "link",
            onclick: () => {
              orderForm.input.value = update.orderId;
              openOrder(update.orderId);
            },
          },
          `${clockTime(update.occurredAt)} · ${update.orderId.slice(0, 8)} · ${update.type}${
            update.status ? ` → ${statusWords[update.status] ?? update.status}` : ""
          }`,
        ),
      ),
    );
    while (feed.children.length > 50) feed.lastElementChild.remove();
  });

  // The live map: the riders on duty, refreshed every few seconds (their fixes come from couriers.positions).
  const map = await createMap(mapBox, { label: "Map of the riders on duty" });
  const markers = new Map();
  async function refreshMap() {
    try {
      const { riders } = await api.get("/v1/riders/on-duty");
      const placed = riders.filter((rider) => rider.location);
      for (const [id, marker] of markers) {
        if (!placed.some((rider) => rider.riderId === id)) {
          marker.remove();
          markers.delete(id);
        }
      }
      for (const rider of placed) {
        const label =
          `${rider.name}: ${rider.status}${rider.currentOrderId ? `, order ${rider.currentOrderId.slice(0, 8)}` : ""}`;
        let marker = markers.get(rider.riderId);
        if (!marker) {
          marker = dot(map, rider.location, { color: RIDER_COLORS[rider.status], label });
          markers.set(rider.riderId, marker);
        }
        marker
          .setLatLng([rider.location.lat, rider.location.lng])
          .setStyle({ fillColor: RIDER_COLORS[rider.status] })
          .setTooltipContent(el("span", {}, label));
      }
      if (placed.length && !mapBox.dataset.fitted) {
        map.fitBounds(
          placed.map((rider) => [rider.location.lat, rider.location.lng]),
          { maxZoom: 15, padding: [30, 30] },
        );
        mapBox.dataset.fitted = "yes";
      }
      const delivering = riders.filter((rider) => rider.status === "delivering").length;
      mapStatus.textContent = `${riders.length} rider${riders.length === 1 ? "" : "s"} on duty, ${
        delivering
      } on a delivery (updated ${clockTime(new Date())})`;
      mapBox.dataset.riders = String(riders.length);
    } catch (failure) {
      mapStatus.textContent = `The riders could not be loaded: ${failure.message}`;
    }
  }
  refreshMap();
  const timer = setInterval(refreshMap, MAP_REFRESH_MS);
  return () => {
    clearInterval(timer);
    orders.disconnect();
  };
}
