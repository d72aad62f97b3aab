// Maps (Leaflet, from Debian's libjs-leaflet) and the customer's live tracking panel (US-072).
import * as L from "../vendor/leaflet/leaflet.esm.min.js";
import { ack } from "./api.js";
import { clockTime, el, timeAgo } from "./dom.js";

const OSM_TILES = "https://tile.openstreetmap.org/{z}/{x}/{y}.png";
let settings = null;

/** The console's settings (config.json next to index.html); absent means OpenStreetMap tiles. */
async function consoleSettings() {
  if (!settings) {
    const response = await fetch("config.json", { cache: "no-store" }).catch(() => null);
    settings = response?.ok ? await response.json() : {};
  }
  return settings;
}

/** A plain grid with each tile's coordinates: the map's background when no tile server is reachable. */
const GridLayer = L.GridLayer.extend({
  createTile(coords) {
    const tile = document.createElement("canvas");
    const size = this.getTileSize();
    tile.width = size.x;
    tile.height = size.y;
    const context = tile.getContext("2d");
    context.fillStyle = "#f3f4f7";
    context.fillRect(0, 0, size.x, size.y);
    context.strokeStyle = "#c4c6d0";
    context.strokeRect(0.5, 0.5, size.x - 1, size.y - 1);
    context.fillStyle = "#6b6b78";
    context.font = "11px system-ui, sans-serif";
    context.fillText(`${coords.z}/${coords.x}/${coords.y}`, 6, 16);
    return tile;
  },
});

/** A Leaflet map in `container`: the configured tile server (`tileUrl`, "grid" for none), falling back to the grid
 * when tiles fail to load (offline). */
export async function createMap(container, { label }) {
  const { tileUrl = OSM_TILES, tileAttribution = "© OpenStreetMap contributors" } = await consoleSettings();
  container.setAttribute("role", "application");
  container.setAttribute("aria-label", label);
  const map = L.map(container, { zoomControl: true, attributionControl: true }).setView([12.9352, 77.6245], 14);
  const grid = new GridLayer();
  if (tileUrl === "grid") {
    grid.addTo(map);
  } else {
    const tiles = L.tileLayer(tileUrl, { maxZoom: 19, attribution: tileAttribution }).addTo(map);
    tiles.once("tileerror", () => {
      map.removeLayer(tiles);
      grid.addTo(map);
    });
  }
  return map;
}

/** A marker drawn as a circle (no image files), with a tooltip naming it: as a node, since Leaflet would put a string
 * in as HTML (a rider's name is text). */
export function dot(map, point, { color, label }) {
  return L.circleMarker([point.lat, point.lng], {
    radius: 9,
    color: "#fff",
    weight: 3,
    fillColor: color,
    fillOpacity: 1,
  })
    .bindTooltip(el("span", {}, label))
    .addTo(map);
}

/** The customer's view of a job (a delivery or a technician's visit): its state's message, the map with the courier
 * and the destination, the ETA text ("Arriving in 12 minutes (2:45 PM)"), "Last updated 1 minute ago" while stale,
 * and a screen-reader sentence. Follows `tracking_status`, `location` and `eta` on the `/tracking` socket. */
export class TrackingPanel {
  constructor(tracking, jobId, { courierWord }) {
    this.tracking = tracking;
    this.jobId = jobId;
    this.courierWord = courierWord;
    this.view = null;
    /** When the position shown (or waiting for the map) was recorded, in milliseconds. */
    this.shownRecordedAt = -Infinity;
    this.message = el("p", { class: "tracking-message", "data-test": "tracking-message" });
    this.eta = el("p", { class: "eta", "data-test": "eta" });
    this.updated = el("p", { class: "muted", "data-test": "last-updated" });
    this.spoken = el("p", { class: "visually-hidden", role: "status", "aria-live": "polite", "data-test": "spoken" });
    this.mapBox = el("div", { class: "map", "data-test": "tracking-map", hidden: true });
    this.element = el("section", { class: "tracking", "aria-label": "Live tracking" }, [
      this.message,
      this.mapBox,
      this.eta,
      this.updated,
      this.spoken,
    ]);
    this.listeners = {
      tracking_status: (status) => status.jobId === jobId && this.status(status),
      location: (position) => position.jobId === jobId && this.move(position),
      eta: (eta) => eta.jobId === jobId && this.showEta(eta),
      connect: ({ recovered }) => recovered || this.start(),
    };
    for (const [event, listener] of Object.entries(this.listeners)) tracking.on(event, listener);
    this.ticker = setInterval(() => this.showUpdated(), 15000);
  }

  /** Asks for the job's view (again after a reconnection that was not recovered). */
  async start() {
    try {
      const view = await ack(this.tracking, "track", { jobId: this.jobId });
      this.view = view;
      this.placeDestination(view.destination);
      // A `tracking_status` of a later change can arrive before the answer: it stays, and so does the ETA it set.
      const current = await this.status(view);
      if (view.lastLocation && (current || (!this.courier && !this.waiting))) this.move(view.lastLocation);
      if (view.eta && current) this.showEta(view.eta);
    } catch (error) {
      this.message.textContent = `Tracking is not available: ${error.message}`;
    }
  }

  /** Shows a state (a `tracking_status`, or the state part of a view); false for one older than what is shown. */
  async status({ state, message, lastUpdatedAt, destination, version }) {
    if (version !== undefined) {
      if (version < this.version) return false;
      this.version = version;
    }
    this.state = state;
    this.lastUpdatedAt = lastUpdatedAt ?? this.lastUpdatedAt;
    // While live or stale the map speaks for itself (stale says "ETA recalculating" where the ETA was).
    const showMap = state === "live" || state === "stale";
    this.message.textContent = showMap ? "" : (message ?? "");
    this.message.hidden = showMap;
    this.mapBox.hidden = !showMap;
    // The map is made once, however many states arrive while its settings load.
    if (showMap) {
      this.mapReady ??= createMap(this.mapBox, { label: `Map of the ${this.courierWord}'s location` }).then((map) => {
        this.map = map;
        this.placeDestination(destination ?? this.view?.destination);
        if (this.waiting) this.move(this.waiting);
      });
      await this.mapReady;
      // A newer state came while the map was made: it does the rest.
      if (version !== undefined && version !== this.version) return false;
      this.map.invalidateSize();
    }
    if (state === "ended" || state === "waiting_for_travel_mode" || state === "not_started") {
      this.eta.textContent = "";
    }
    if (state === "stale") this.eta.textContent = message ?? "ETA recalculating";
    this.showUpdated();
    return true;
  }

  /** The destination's marker, once the map and the destination are both known. */
  placeDestination(target) {
    if (!target || this.destination || !this.map) return;
    this.destination = dot(this.map, target, { color: "#b3261e", label: target.label ?? "Destination" });
    this.destination.getElement()?.setAttribute("data-test", "destination-marker");
    if (this.courier) this.frame(this.courier.getLatLng());
    else this.map.setView(this.destination.getLatLng(), 15, { animate: false });
  }

  /** Shows the courier at `at` and the destination together. Not animated: a position that arrives during an
   * animated zoom would pan from the old zoom and leave the destination out of view. */
  frame(at) {
    this.map.fitBounds([at, this.destination.getLatLng()], { padding: [40, 40], maxZoom: 16, animate: false });
  }

  /** Shows the courier at `position`, unless one recorded later is shown or waiting: the view answered to `track`
   * can arrive after a newer `location` (the socket is in the job's room before its view is read). */
  move(position) {
    const recordedAt = Date.parse(position.recordedAt);
    if (recordedAt < this.shownRecordedAt) return;
    if (Number.isFinite(recordedAt)) this.shownRecordedAt = recordedAt;
    this.lastUpdatedAt = position.recordedAt;
    // The map is still being made (its settings load): the latest position waits for it.
    this.waiting = this.map ? null : position;
    if (!this.map) return;
    const at = [position.lat, position.lng];
    if (this.courier) {
      this.courier.setLatLng(at);
    } else {
      this.courier = dot(this.map, position, { color: "#0b57d0", label: this.courierWord });
      this.courier.getElement()?.setAttribute("data-test", "courier-marker");
    }
    // The courier and the destination stay in view together: the map frames both again when either leaves it.
    const bounds = this.map.getBounds();
    if (this.destination) {
      if (!bounds.contains(at) || !bounds.contains(this.destination.getLatLng())) this.frame(at);
    } else if (!bounds.contains(at)) {
      this.map.setView(at, 15, { animate: false });
    }
    this.mapBox.dataset.courierLat = position.lat.toFixed(6);
    this.mapBox.dataset.courierLng = position.lng.toFixed(6);
    this.showUpdated();
  }

  showEta(eta) {
    if (this.state === "stale" || this.state === "ended") return;
    if (!eta.available) {
      this.eta.textContent = eta.text ?? "ETA unavailable";
      return;
    }
    this.eta.textContent = eta.arrivalAt ? `${eta.text} (${clockTime(eta.arrivalAt)})` : eta.text;
    const km = (eta.distanceMeters / 1000).toFixed(1);
    const minutes = Math.max(1, Math.round(eta.seconds / 60));
    const who = this.courierWord[0].toUpperCase() + this.courierWord.slice(1);
    this.spoken.textContent = `${who} is ${km} km away and expected in ${minutes} minute${minutes === 1 ? "" : "s"}.`;
  }

  showUpdated() {
    this.updated.textContent =
      this.state === "stale" && this.lastUpdatedAt ? `Last updated ${timeAgo(this.lastUpdatedAt)}` : "";
  }

  close() {
    clearInterval(this.ticker);
    for (const [event, listener] of Object.entries(this.listeners)) this.tracking.off(event, listener);
    this.tracking.emit("untrack", { jobId: this.jobId });
    this.map?.remove();
  }
}
