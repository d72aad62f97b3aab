// The vendor's live dashboard: its orders by stage (new, accepted, ready, collected), changed live by `/orders`;
// after being offline (a reconnection that was not recovered) it catches up with GET /v1/vendors/me/orders.
import { clockTime, el, rupees, showError } from "./dom.js";

const COLUMNS = [
  { title: "New", statuses: ["PendingVendorAcceptance"] },
  { title: "Accepted", statuses: ["Preparing"] },
  { title: "Ready", statuses: ["ReadyForPickup"] },
  { title: "Collected", statuses: ["InTransit", "Delivered"] },
];

export async function vendorScreen(screen, { api }) {
  const orders = api.socket("orders");
  const known = new Map();
  const error = el("p", { role: "alert", "data-test": "vendor-error" });
  const synced = el("p", { class: "muted", role: "status", "data-test": "synced" });
  const board = el("div", { class: "board", "data-test": "dashboard" });
  screen.append(synced, error, board);

  async function catchUp() {
    try {
      const seen = new Map();
      let after = "";
      do {
        const page = await api.get(
          `/v1/vendors/me/orders?state=all&limit=100${after ? `&after=${encodeURIComponent(after)}` : ""}`,
        );
        for (const order of page.orders) seen.set(order.id, order);
        after = page.nextAfter ?? "";
      } while (after);
      for (const order of seen.values()) keep(order);
      synced.textContent = `Up to date (${clockTime(new Date())})`;
      render();
    } catch (failure) {
      showError(error, failure);
    }
  }

  /** Keeps `order` unless a newer version of it is known (answers can arrive out of order). */
  function keep(order) {
    if ((known.get(order.id)?.version ?? -1) <= order.version) known.set(order.id, order);
  }

  async function refresh(id) {
    try {
      keep(await api.get(`/v1/orders/${id}`));
      render();
    } catch (failure) {
      showError(error, failure);
    }
  }

  async function act(order, verb) {
    error.textContent = "";
    try {
      keep(
        await api.post(
          `/v1/orders/${order.id}/${verb}`,
          verb === "cancel" ? { reason: "The store cannot make it" } : undefined,
        ),
      );
      render();
    } catch (failure) {
      showError(error, failure);
    }
  }

  function render() {
    const today = [...known.values()].filter((order) => order.status !== "Cancelled");
    board.replaceChildren(
      ...COLUMNS.map(({ title, statuses }) => {
        const here = today.filter((order) => statuses.includes(order.status));
        return el(
          "section",
          { class: "column", "aria-label": `${title} orders`, "data-test": `column-${title.toLowerCase()}` },
          el("h3", {}, `${title} (${here.length})`),
          el(
            "ul",
            {},
            here.map((order) =>
              el(
                "li",
                { class: "card", "data-test": "vendor-order", "data-id": order.id, "data-status": order.status },
                el("strong", {}, `#${order.id.slice(0, 8)} · ${rupees(order.totalAmount)}`),
                el("span", {}, `${order.deliveryAddress.area} · ${clockTime(order.createdAt)}`),
                order.rider ? el("span", {}, `Rider: ${order.rider.name}`) : "",
                el(
                  "div",
                  { class: "actions" },
                  order.status === "PendingVendorAcceptance"
                    ? el(
                        "button",
                        { type: "button", "data-test": "vendor-accept", onclick: () => act(order, "accept") },
                        "Accept",
                      )
                    : "",
                  order.status === "Preparing"
                    ? el(
                        "button",
                        { type: "button", "data-test": "vendor-ready", onclick: () => act(order, "ready") },
                        "Ready for pickup",
                      )
                    : "",
                  ["PendingVendorAcceptance", "Preparing", "ReadyForPickup"].includes(order.status)
                    ? el(
                        "button",
                        { type: "button", class: "secondary", onclick: () => act(order, "cancel") },
                        "Cancel",
                      )
                    : "",
                ),
              ),
            ),
          ),
        );
      }),
    );
  }

  orders.on("order_update", (update) => refresh(update.orderId));
  // A recovered session got what it missed; a new one catches up from the API.
  orders.on("connect", ({ recovered }) =>
    recovered ? (synced.textContent = `Up to date (${clockTime(new Date())})`) : catchUp(),
  );
  orders.on(
    "disconnect",
    () => (synced.textContent = "Offline: the dashboard catches up when the connection is back."),
  );
  return () => orders.disconnect();
}
