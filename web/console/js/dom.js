// Small DOM and formatting helpers every screen uses.

/** Creates an element: `el("button", {type: "button", onclick}, "Accept")`; attributes starting with `on` are
 * listeners, `hidden`/`disabled` are properties, the rest attributes. */
export function el(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "hidden" || name === "disabled") element[name] = value;
    else element.setAttribute(name, value === true ? "" : value);
  }
  element.append(...children.flat().filter((child) => child !== undefined && child !== null && child !== false));
  return element;
}

export const byId = (id) => document.getElementById(id);

/** A clock time in the viewer's locale, e.g. "2:45 PM". */
export function clockTime(date) {
  return new Date(date).toLocaleTimeString("en-US", { hour: "numeric", minute: "2-digit" });
}

/** "just now", "1 minute ago", "5 minutes ago", "2 hours ago". */
export function timeAgo(date, now = Date.now()) {
  const seconds = Math.max(0, Math.round((now - new Date(date).getTime()) / 1000));
  if (seconds < 45) return "just now";
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} minute${minutes === 1 ? "" : "s"} ago`;
  const hours = Math.round(minutes / 60);
  return `${hours} hour${hours === 1 ? "" : "s"} ago`;
}

/** An amount in Indian rupees, e.g. "₹349". */
export function rupees(amount) {
  return new Intl.NumberFormat("en-IN", { style: "currency", currency: "INR", maximumFractionDigits: 0 }).format(
    amount,
  );
}

/** Human words for an order's or a service request's status. */
export const statusWords = {
  PendingVendorAcceptance: "Waiting for the vendor",
  Preparing: "Being prepared",
  ReadyForPickup: "Ready for pickup",
  InTransit: "On the way",
  Delivered: "Delivered",
  Cancelled: "Cancelled",
  Requested: "Requested",
  TechnicianAssigned: "Technician assigned",
  OnTheWay: "Technician on the way",
  WorkInProgress: "Work in progress",
  Completed: "Completed",
};

/** The ids of the jobs this browser has shown under `key` (kept in localStorage), newest first, at most 20. */
export function remembered(key) {
  return {
    all: () => JSON.parse(localStorage.getItem(key) ?? "[]"),
    add(id) {
      localStorage.setItem(key, JSON.stringify([id, ...this.all().filter((kept) => kept !== id)].slice(0, 20)));
    },
  };
}

/** A status line that screen readers announce when it changes. */
export function liveRegion(id, text = "") {
  return el("p", { id, class: "status", role: "status", "aria-live": "polite" }, text);
}

/** Shows an error from the API (or the network) in an alert region. */
export function showError(region, error) {
  region.textContent = error.message ?? String(error);
}

/** A modal dialog (`role` "dialog" or "alertdialog" among `attributes`) in the backdrop that covers the page. */
export function modal(attributes, ...children) {
  const dialog = el("section", { class: "dialog", "aria-modal": "true", ...attributes }, ...children);
  return el("div", { class: "backdrop" }, dialog);
}

/** Shows a `modal` dialog (`backdrop` holds it): the page behind is inert, the dialog's first button takes the
 * focus, and closing gives the focus back to where it was. Returns the function that closes it. */
export function openDialog(backdrop) {
  const returnTo = document.activeElement;
  const main = byId("main");
  main.inert = true;
  document.body.append(backdrop);
  backdrop.querySelector("button:not([hidden])")?.focus();
  return () => {
    backdrop.remove();
    if (!document.querySelector("body > .backdrop")) main.inert = false;
    if (returnTo?.isConnected) returnTo.focus();
  };
}

/** A one-field form (label, input, submit button, then `after`) that hands the trimmed value to `onSubmit`;
 * `form.input` is its field. */
export function lookupForm({ id, label, button, onSubmit, secondary = false }, ...after) {
  const input = el("input", { id, required: true, autocomplete: "off" });
  const submit = (event) => {
    event.preventDefault();
    onSubmit(input.value.trim());
  };
  const form = el(
    "form",
    { class: "inline", onsubmit: submit },
    el("label", { for: id }, label),
    input,
    el("button", { type: "submit", class: secondary ? "secondary" : undefined }, button),
    ...after,
  );
  form.input = input;
  return form;
}
